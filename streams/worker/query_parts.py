"""Builds the worker's query path: the processor, the producer its replies go out
on, the answering of one request and the query consumer's configuration.

Replies use a producer of their own with no linger: the shared Faust producer
lingers a few milliseconds to batch changelog writes, which a caller waiting
for its reply would feel.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket

from aiokafka import AIOKafkaProducer

from streams.adapters.kafka.admin import bootstrap_servers
from streams.adapters.kafka.publish import Outgoing, Publisher
from streams.memory.agent_configs import AgentConfigs
from streams.query.answered import AnsweredRequests
from streams.query.answering import QueryAnswering
from streams.query.consumer_config import QueryConsumerConfig
from streams.query.engine import QueryConfig, QueryEngine, SearchRecorder
from streams.query.processor import QueryProcessor
from streams.settings import Settings
from streams.worker.runtime import Runtime

log = logging.getLogger(__name__)


def build_query_processor(runtime: Runtime, agent_configs: AgentConfigs,
                          search_log: SearchRecorder | None = None) -> QueryProcessor:
    s = runtime.settings
    q = s.query
    engine = QueryEngine(
        QueryConfig(
            candidate_pool=q.candidate_pool, relativity=q.relativity, min_score=q.min_score,
            max_memory_chars=q.max_memory_chars, user_share=q.user_share, pref_top_k=q.pref_top_k,
            default_long_memory=s.consolidation.default_long_memory,
        ),
        runtime.reader, agent_configs, runtime.providers, runtime.tokens, search_log=search_log,
    )
    return QueryProcessor(engine, s.kafka.dlq_topic)


def query_consumer_config(s: Settings) -> QueryConsumerConfig:
    q = s.query
    group = q.group_id or f"{s.kafka.app_id}-query"
    return QueryConsumerConfig(
        broker=s.kafka.broker, topic=s.kafka.queries_topic, group_id=group,
        client_id=f"{group}.{q.instance_id or socket.gethostname()}.{os.getpid()}",
        session_timeout_s=q.session_timeout_s, heartbeat_interval_s=q.heartbeat_interval_s,
        instance_id=q.instance_id, concurrency=q.concurrency, drain_timeout_s=q.drain_timeout_s,
    )


def build_query_answering(runtime: Runtime, agent_configs: AgentConfigs, replies: ReplyPublisher,
                          dead_letters: Publisher,
                          search_log: SearchRecorder | None = None) -> QueryAnswering:
    s = runtime.settings
    answered = AnsweredRequests(runtime.redis, prefix=s.redis.key_prefix,
                                retry_after_s=s.redis.retry_after_s)
    return QueryAnswering(
        build_query_processor(runtime, agent_configs, search_log), replies.deliver, dead_letters,
        answered, retry_initial_s=s.ingest.retry_initial_s, retry_max_s=s.ingest.retry_max_s)


class ReplyPublisher:
    """Sends replies and dead letters; a failed send is retried a few times,
    then logged (the caller's own timeout reports it)."""

    def __init__(self, broker: str, attempts: int = 3) -> None:
        self._producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers(broker),
                                          linger_ms=0, acks=1)
        self._started = False
        self._lock = asyncio.Lock()
        self.attempts = attempts

    async def start(self) -> None:
        async with self._lock:
            if not self._started:
                await self._producer.start()
                self._started = True

    async def stop(self) -> None:
        if self._started:
            await self._producer.stop()
            self._started = False

    async def deliver(self, r: Outgoing) -> bool:
        """Send one reply; True once the broker acknowledged it."""
        await self.start()
        for attempt in range(1, self.attempts + 1):
            try:
                await self._producer.send_and_wait(
                    r.topic, r.value, key=r.key, partition=r.partition, headers=r.headers or None)
                return True
            except Exception as exc:
                if attempt == self.attempts:
                    log.error("reply to %s lost after %d attempts: %s", r.topic, attempt, exc)
                else:
                    await asyncio.sleep(0.05 * attempt)
        return False
