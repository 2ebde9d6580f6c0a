"""Fixtures for tests against the real Kafka, Redis and MariaDB.

Every test gets its own namespace: topic names, consumer group, database and
Redis key prefix are unique, so tests never see each other's data.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from tests.support.services import (
    KAFKA_BOOTSTRAP,
    KAFKA_BROKER,
    REDIS_PORT,
    free_port,
    mysql_cli,
    mysql_url,
    require_services,
    unique,
)
from tests.support.worker import WorkerProcess


@pytest.fixture(scope="session", autouse=True)
def _services() -> None:
    require_services()


@dataclass
class Stack:
    name: str
    tmp: Path
    partitions: int = 4
    database: str = ""
    redis_url: str | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    workers: list[WorkerProcess] = field(default_factory=list)

    @property
    def topics(self) -> dict[str, str]:
        n = self.name
        return {
            "chat": f"{n}.chat",
            "subagent": f"{n}.subagent",
            "dlq": f"{n}.dlq",
            "retry": f"{n}.retry",
            "closed": f"{n}.closed",
            "queries": f"{n}.queries",
            "agent_config": f"{n}.agent-config",
        }

    @property
    def db_url(self) -> str:
        return mysql_url(self.database)

    def env(self, app_id: str | None = None, **overrides: str) -> dict[str, str]:
        t = self.topics
        env = {
            "MEMSTREAM_KAFKA__BROKER": KAFKA_BROKER,
            "MEMSTREAM_KAFKA__APP_ID": app_id or self.name,
            "MEMSTREAM_KAFKA__PARTITIONS": str(self.partitions),
            "MEMSTREAM_KAFKA__SESSION_TIMEOUT_S": "6",
            "MEMSTREAM_KAFKA__HEARTBEAT_INTERVAL_S": "1",
            "MEMSTREAM_KAFKA__COMMIT_INTERVAL_S": "0.5",
            "MEMSTREAM_KAFKA__CHAT_TOPIC": t["chat"],
            "MEMSTREAM_KAFKA__SUBAGENT_TOPIC": t["subagent"],
            "MEMSTREAM_KAFKA__DLQ_TOPIC": t["dlq"],
            "MEMSTREAM_KAFKA__RETRY_TOPIC": t["retry"],
            "MEMSTREAM_KAFKA__SESSION_CLOSED_TOPIC": t["closed"],
            "MEMSTREAM_KAFKA__QUERIES_TOPIC": t["queries"],
            "MEMSTREAM_KAFKA__AGENT_CONFIG_TOPIC": t["agent_config"],
            "MEMSTREAM_KAFKA__DATA_DIR": str(self.tmp / f"data-{app_id or self.name}"),
            "MEMSTREAM_DATABASE__URL": self.db_url,
            "MEMSTREAM_REDIS__KEY_PREFIX": self.name,
            "MEMSTREAM_REDIS__RETRY_AFTER_S": "0.5",
            "MEMSTREAM_INGEST__RETRY_MAX_S": "2",
            "MEMSTREAM_WEB__PORT": str(free_port()),
            "MEMSTREAM_LOG_LEVEL": "info",
        }
        if self.redis_url:
            env["MEMSTREAM_REDIS__URL"] = self.redis_url
        env.update(self.extra_env)
        env.update(overrides)
        return env

    def worker(self, app_id: str | None = None, **overrides: str) -> WorkerProcess:
        w = WorkerProcess(self.env(app_id, **overrides), self.tmp / f"worker-{len(self.workers)}.log")
        self.workers.append(w)
        return w

    def settings_env(self) -> dict[str, str]:
        return self.env()

    # ----------------------------------------------------------------- kafka
    async def produce(self, events: Sequence[dict[str, Any] | bytes], *, topic: str | None = None,
                      keys: Sequence[bytes | None] | None = None,
                      headers: Sequence[list[tuple[str, bytes]]] | None = None) -> None:
        p = AIOKafkaProducer(bootstrap_servers=KAFKA_BOOTSTRAP, acks="all", linger_ms=5)
        await p.start()
        try:
            futs = []
            for i, ev in enumerate(events):
                if isinstance(ev, bytes):
                    value, key = ev, None
                else:
                    value, key = json.dumps(ev).encode(), str(ev.get("conversation_id", "")).encode()
                if keys is not None:
                    key = keys[i]
                futs.append(await p.send(topic or self.topics["chat"], value, key=key,
                                         headers=headers[i] if headers else None))
            await asyncio.gather(*futs)
        finally:
            await p.stop()

    async def read_topic(self, topic: str, *, expect: int | None = None, timeout: float = 30.0) -> list[Any]:
        c = AIOKafkaConsumer(bootstrap_servers=KAFKA_BOOTSTRAP, auto_offset_reset="earliest",
                             enable_auto_commit=False)
        await c.start()
        try:
            deadline = asyncio.get_running_loop().time() + timeout
            while True:
                parts = c.partitions_for_topic(topic)
                if parts:
                    break
                await c.topics()  # refreshes metadata
                if asyncio.get_running_loop().time() > deadline:
                    return []
                await asyncio.sleep(0.3)
            tps = [TopicPartition(topic, p) for p in sorted(parts)]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            out: list[Any] = []
            while True:
                batch = await c.getmany(timeout_ms=500)
                for msgs in batch.values():
                    out.extend(msgs)
                ends = await c.end_offsets(tps)
                done = all(await c.position(tp) >= ends[tp] for tp in tps)
                if expect is None and done:
                    return out
                if expect is not None and len(out) >= expect and done:
                    return out
                if asyncio.get_running_loop().time() > deadline:
                    return out
        finally:
            await c.stop()

    async def group_caught_up(self, group: str, topics: Sequence[str]) -> bool:
        """True when ``group`` has committed every partition of ``topics`` up to its end."""
        admin = AIOKafkaAdminClient(bootstrap_servers=KAFKA_BOOTSTRAP)
        c = AIOKafkaConsumer(bootstrap_servers=KAFKA_BOOTSTRAP)
        await admin.start()
        await c.start()
        try:
            committed = await admin.list_consumer_group_offsets(group)
            tps = []
            for t in topics:
                for p in c.partitions_for_topic(t) or ():
                    tps.append(TopicPartition(t, p))
            if not tps:
                return False
            ends = await c.end_offsets(tps)
            for tp in tps:
                end = ends[tp]
                meta = committed.get(tp)
                if end > 0 and (meta is None or meta.offset < end):
                    return False
            return True
        finally:
            await c.stop()
            await admin.close()

    # --------------------------------------------------------------- storage
    def engine(self) -> AsyncEngine:
        return create_async_engine(self.db_url, pool_size=2)

    def redis(self) -> Redis:
        return Redis.from_url(self.redis_url or f"redis://127.0.0.1:{REDIS_PORT}/0")

    def sql(self, query: str) -> list[list[str]]:
        out = mysql_cli(query, database=self.database)
        return [line.split("\t") for line in out.splitlines() if line]


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    name = unique("it")
    database = f"ms_{name}"
    mysql_cli(f"CREATE DATABASE {database} CHARACTER SET utf8mb4")
    s = Stack(name=name, tmp=tmp_path, database=database,
              redis_url=f"redis://127.0.0.1:{REDIS_PORT}/0")
    try:
        yield s
    finally:
        for w in s.workers:
            w.kill()
        mysql_cli(f"DROP DATABASE IF EXISTS {database}")


@pytest.fixture
async def redis_client(stack: Stack) -> AsyncIterator[Redis]:
    r = stack.redis()
    yield r
    await r.aclose()
