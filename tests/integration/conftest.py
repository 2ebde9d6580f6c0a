"""Fixtures for tests against the real Kafka, Redis and MariaDB.

Every test gets its own namespace: topic names, consumer group, database and
Redis key prefix are unique, so tests never see each other's data.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import AsyncIterator, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from streams.adapters.db.messages import MessageStore
from streams.adapters.db.stale_marks import StaleMarkStore
from streams.adapters.kafka.clients import partitions as kafka_partitions
from streams.adapters.redis.conversation_cache import ConversationCache
from streams.session.reader import SessionReader
from streams.session.stale import StaleHistories
from streams.settings import KafkaSettings
from streams.tokens import TokenCounter
from tests.support.services import (
    KAFKA_BOOTSTRAP,
    KAFKA_BROKER,
    REDIS_PORT,
    create_database,
    delete_topics_containing,
    drop_database,
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


async def create_topic(name: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=KAFKA_BOOTSTRAP)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        await admin.close()


async def partitions(topic: str) -> list[int]:
    """Partition numbers of ``topic`` ([] when it does not exist yet)."""
    return await kafka_partitions(KafkaSettings(broker=KAFKA_BROKER), topic)


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
            "idle": f"{n}.idle",
            "erasures": f"{n}.erasures",
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
            "MEMSTREAM_KAFKA__IDLE_TOPIC": t["idle"],
            "MEMSTREAM_KAFKA__ERASURES_TOPIC": t["erasures"],
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
        w = WorkerProcess(
            self.env(app_id, **overrides), self.tmp / f"worker-{len(self.workers)}.log"
        )
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
                    value, key = (json.dumps(ev).encode(),
                                  str(ev.get("conversation_id", "")).encode())
                if keys is not None:
                    key = keys[i]
                futs.append(await p.send(topic or self.topics["chat"], value, key=key,
                                         headers=headers[i] if headers else None))
            await asyncio.gather(*futs)
        finally:
            await p.stop()

    async def read_topic(
        self, topic: str, *, expect: int | None = None, timeout: float = 30.0
    ) -> list[Any]:
        c = AIOKafkaConsumer(bootstrap_servers=KAFKA_BOOTSTRAP, auto_offset_reset="earliest",
                             enable_auto_commit=False)
        await c.start()
        try:
            deadline = asyncio.get_running_loop().time() + timeout
            while not (parts := await partitions(topic)):
                if asyncio.get_running_loop().time() > deadline:
                    return []
                await asyncio.sleep(0.3)
            tps = [TopicPartition(topic, p) for p in parts]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            out: list[Any] = []
            while True:
                batch = await c.getmany(timeout_ms=500)
                for msgs in batch.values():
                    out.extend(msgs)
                ends = await c.end_offsets(tps)
                done = all([await c.position(tp) >= ends[tp] for tp in tps])
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
            try:
                committed = await admin.list_consumer_group_offsets(group)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                return False  # the coordinator is not known yet (a fresh broker)
            tps = [TopicPartition(t, p) for t in topics for p in await partitions(t)]
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


@contextmanager
def new_stack(tmp: Path) -> Iterator[Stack]:
    name = unique("it")
    database = f"ms_{name}"
    create_database(database)
    s = Stack(name=name, tmp=tmp, database=database,
              redis_url=f"redis://127.0.0.1:{REDIS_PORT}/0")
    try:
        yield s
    finally:
        for w in s.workers:
            w.kill()
        drop_database(database)
        delete_topics_of(name)


def delete_topics_of(name: str) -> None:
    """:func:`delete_topics_containing` the stack's id, from a synchronous teardown: in
    a thread of its own (the test's event loop may still be set on this one), not
    waited for past a minute; a failure is only reported (the next test does not
    depend on it)."""
    pool = ThreadPoolExecutor(1)
    try:
        pool.submit(asyncio.run, delete_topics_containing(name)).result(timeout=60)
    except Exception as exc:
        warnings.warn(f"topics of {name} not deleted: {type(exc).__name__}: {exc!r}",
                      stacklevel=1)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    with new_stack(tmp_path) as s:
        yield s


@pytest.fixture(scope="module")
def shared_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One stack (and usually one worker) for a module of read-only checks."""
    with new_stack(tmp_path_factory.mktemp("shared")) as s:
        yield s


@pytest.fixture
async def redis_client(stack: Stack) -> AsyncIterator[Redis]:
    r = stack.redis()
    yield r
    await r.aclose()


@asynccontextmanager
async def session_reader(stack: Stack, redis_url: str | None = None,
                         **kw: Any) -> AsyncIterator[SessionReader]:
    """A SessionReader on the stack's database and Redis, as the query path builds it."""
    engine = stack.engine()
    url = redis_url if redis_url is not None else stack.redis_url
    redis = Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5) if url else None
    cache = ConversationCache(redis, prefix=stack.name, retry_after_s=0.0)
    stale = StaleHistories(cache, StaleMarkStore(engine))
    try:
        yield SessionReader(MessageStore(engine), cache, TokenCounter(), stale=stale, **kw)
    finally:
        if redis is not None:
            await redis.aclose()
        await engine.dispose()


def chat_event(i: int, conv: str, tenant: str = "t1", **kw: Any) -> dict[str, Any]:
    doc = {"event_id": f"{tenant}-{conv}-{i}", "type": "message", "tenant_id": tenant,
           "user_id": "u1", "agent_id": "a1", "conversation_id": conv,
           "role": "user" if i % 2 == 0 else "assistant", "content": f"{conv} message {i}",
           "created_at": f"2026-11-30T08:{(i // 60) % 60:02d}:{i % 60:02d}Z"}
    doc.update(kw)
    return doc


def session_end_event(conv: str, tenant: str = "t1", n: int = 0, **kw: Any) -> dict[str, Any]:
    doc = {"event_id": f"{tenant}-{conv}-end-{n}", "type": "session_end", "tenant_id": tenant,
           "user_id": "u1", "agent_id": "a1", "conversation_id": conv,
           "created_at": "2026-11-30T08:00:00Z"}
    doc.update(kw)
    return doc
