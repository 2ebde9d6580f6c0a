"""What the agents share inside one worker process: the runtime and the
processors built on it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from functools import cache
from typing import Any

from streams.adapters.db.dead_letter_ledger import DeadLetterLedger
from streams.adapters.kafka.dead_letters import DeadLetterFinder, ExactlyOnceDeadLetters
from streams.adapters.kafka.publish import ProducerPublisher
from streams.backoff import retry_forever
from streams.consolidation.retry_scheduler import RetryScheduler
from streams.ingest.processor import IngestConfig, IngestProcessor
from streams.memory.agent_configs import TableAgentConfigs
from streams.query.answering import QueryAnswering
from streams.query.consumer import QueryConsumer
from streams.session.idle import IdleScanner
from streams.stats.search_log import SearchLog, SearchLogWriter
from streams.worker.app import app, settings
from streams.worker.commit_guard import CommitGuard
from streams.worker.consolidation_parts import (
    Consolidation,
    build_consolidation,
    build_retry_scheduler,
)
from streams.worker.faust_glue import (
    FaustTable,
    admit,
    finish,
    install_commit_guard,
    seek_uncommitted_to_start,
)
from streams.worker.query_parts import ReplyPublisher, build_query_answering, query_consumer_config
from streams.worker.runtime import Runtime
from streams.worker.tables import agent_configs, sessions
from streams.worker.web import install as install_web

seek_uncommitted_to_start()
commit_guard = CommitGuard()
install_commit_guard(commit_guard, out_of_order_topics=[settings.kafka.retry_topic],
                     recover_after_s=settings.kafka.redeliver_after_s)
# the worker command migrated the schema, or checked it (--no-migrate), before Faust started
runtime = Runtime(settings, migrate=False)
# memory.queries has a consumer group of its own, outside Faust's (agents/query.py)
queries = QueryConsumer(query_consumer_config(settings))
install_web(app, runtime, settings, queries)


async def _close_runtime(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
    await queries.stop()  # drains and commits while replies and Redis still work
    if _replies is not None:
        await _replies.stop()
    if _search_log is not None:
        await _search_log.stop()
    await runtime.stop()


app.on_before_shutdown.connect(_close_runtime)


async def admitted(stream: Any, events: Iterable[Any]) -> list[Any]:
    """The events that reach memstream in order. One delivered after Faust passed
    over an earlier record of its partition is left alone: acknowledged to Faust
    only (the commit guard holds the commit at the record passed over, and the
    partition is delivered again from there), so no state moves past a record
    memstream has not seen."""
    kept = []
    for event in events:
        if admit(commit_guard, event):
            kept.append(event)
        else:
            await stream.ack(event)
    return kept


async def acknowledge(stream: Any, events: Iterable[Any]) -> None:
    """Acknowledge events whose records are stored or dead-lettered: the commit
    guard learns it first, then Faust."""
    for event in events:
        finish(commit_guard, event)
        await stream.ack(event)


@cache
def publisher() -> ExactlyOnceDeadLetters:
    """The worker's publisher: through Faust's producer, dead letters exactly once."""
    return ExactlyOnceDeadLetters(
        ProducerPublisher(app.producer.send), dlq_topic=settings.kafka.dlq_topic,
        ledger=lambda: DeadLetterLedger(runtime.engine),
        finder=DeadLetterFinder(settings.kafka))


async def ingest_processor() -> IngestProcessor:
    await runtime.start()
    # A batch touches hundreds of conversations and writes each one's state
    # once; Faust's default (pause the stream above 100 pending changelog
    # records) would throttle every batch.
    app.producer.buffer.max_messages = max(app.producer.buffer.max_messages,
                                           4 * settings.ingest.batch_size)
    k, i = settings.kafka, settings.ingest
    if runtime.cache.enabled:  # marks a previous process left are honoured from the first batch
        await retry_forever(runtime.stale.sync, what="stale-marks",
                            initial_s=i.retry_initial_s, max_s=i.retry_max_s)
    return IngestProcessor(
        IngestConfig(
            chat_topic=k.chat_topic,
            subagent_topic=k.subagent_topic,
            dlq_topic=k.dlq_topic,
            session_closed_topic=k.session_closed_topic,
            max_content_bytes=i.max_content_bytes,
            retry_initial_s=i.retry_initial_s,
            retry_max_s=i.retry_max_s,
            idle_topic=k.idle_topic,
            idle_timeout_s=settings.consolidation.idle_timeout_s,
            closed_retention_s=settings.consolidation.closed_session_retention_s,
        ),
        runtime.store,
        runtime.cache,
        publisher(),
        FaustTable(sessions),
        stale=runtime.stale,
        state_flush_interval_s=settings.ingest.state_flush_interval_s,
    )


_consolidation: Consolidation | None = None
_consolidation_lock = asyncio.Lock()


async def consolidation() -> Consolidation:
    """The worker's one consolidation pipeline and processor (shared by the
    session-closed and retry agents, so they share the per-conversation locks)."""
    global _consolidation
    async with _consolidation_lock:
        if _consolidation is None:
            await runtime.start()
            _consolidation = build_consolidation(
                runtime, TableAgentConfigs(agent_configs), publisher())
        return _consolidation


def rebalancing() -> bool:
    """A rebalance or shutdown is under way: held records must be let go."""
    return bool(app.rebalancing) or not app.flow_control.is_active()


async def retry_scheduler() -> RetryScheduler:
    return build_retry_scheduler(runtime, await consolidation(), publisher(), rebalancing)


@cache
def idle_scanner() -> IdleScanner:
    c = settings.consolidation
    return IdleScanner(timeout_s=c.idle_timeout_s,
                       resend_after_s=max(5 * c.idle_scan_interval_s, 60.0),
                       retention_s=c.closed_session_retention_s)


_query_answering: QueryAnswering | None = None
_replies: ReplyPublisher | None = None
_search_log: SearchLogWriter | None = None
_query_lock = asyncio.Lock()


async def query_answering() -> QueryAnswering:
    """What the query consumer runs for each request, with one reply producer."""
    global _query_answering, _replies, _search_log
    async with _query_lock:
        if _query_answering is None:
            await runtime.start()
            replies = ReplyPublisher(settings.kafka.broker)
            await replies.start()
            _replies = replies
            _search_log = SearchLogWriter(SearchLog(runtime.engine))
            await _search_log.start()
            _query_answering = build_query_answering(
                runtime, TableAgentConfigs(agent_configs), replies, publisher(),
                search_log=_search_log)
        return _query_answering
