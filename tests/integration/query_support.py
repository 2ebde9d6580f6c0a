"""Query traffic for tests against real workers: requests sent to chosen
partitions of the query topic with Spring's reply headers, and every reply read
back with its arrival time, duplicates included."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from streams.wire.headers import header
from streams.wire.spring_reply import CORRELATION_ID, request_headers
from tests.integration.conftest import Stack
from tests.support.services import KAFKA_BOOTSTRAP
from tests.support.worker import ROOT, eventually

# answers come from the Session part only: cheap, so the figures measure delivery
QUERY_ENV = {"MEMSTREAM_CONSOLIDATION__DEFAULT_LONG_MEMORY": "false"}


def query_body(timeout_ms: int, agent_id: str = "a1", **kw: Any) -> bytes:
    doc = {"tenant_id": "t1", "user_id": "u1", "agent_id": agent_id, "message": "where to?",
           "options": {"include_short_term": False, "timeout_ms": timeout_ms}}
    doc.update(kw)
    return json.dumps(doc).encode()


@dataclass
class Sent:
    partition: int
    at: float
    replies: list[float] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)

    @property
    def latency(self) -> float | None:
        return self.replies[0] - self.at if self.replies else None


class QueryTraffic:
    """``async with QueryTraffic(stack) as t: await t.send(partition)``."""

    def __init__(self, stack: Stack, *, timeout_ms: int = 30_000) -> None:
        self.stack = stack
        self.topic = stack.topics["queries"]
        self.reply_topic = f"{stack.name}.replies"
        self.timeout_ms = timeout_ms
        self.sent: dict[bytes, Sent] = {}
        self.strays = 0
        self._producer = AIOKafkaProducer(bootstrap_servers=KAFKA_BOOTSTRAP, linger_ms=0)
        self._consumer = AIOKafkaConsumer(bootstrap_servers=KAFKA_BOOTSTRAP,
                                          enable_auto_commit=False, fetch_max_wait_ms=50)
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> QueryTraffic:
        await self.stack.produce([b"topic"], topic=self.reply_topic)  # one partition
        await self._producer.start()
        await self._consumer.start()
        tp = TopicPartition(self.reply_topic, 0)
        self._consumer.assign([tp])
        await self._consumer.seek_to_end(tp)
        await self._consumer.position(tp)
        self._reader = asyncio.get_running_loop().create_task(self._read())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        await self._consumer.stop()
        await self._producer.stop()

    async def _read(self) -> None:
        while True:
            for records in (await self._consumer.getmany(timeout_ms=100)).values():
                now = time.monotonic()
                for r in records:
                    sent = self.sent.get(header(list(r.headers), CORRELATION_ID) or b"")
                    if sent is None:
                        self.strays += 1
                    else:
                        sent.replies.append(now)
                        sent.bodies.append(json.loads(r.value))

    async def send(self, partition: int, *, body: bytes | None = None,
                   timestamp_ms: int | None = None) -> bytes:
        cid = uuid.uuid4().bytes
        headers = request_headers(self.reply_topic, cid, 0)
        self.sent[cid] = Sent(partition, time.monotonic())
        await self._producer.send_and_wait(
            self.topic, body or query_body(self.timeout_ms), key=b"t1/u1", partition=partition,
            headers=headers, timestamp_ms=timestamp_ms)
        return cid

    async def steady(self, partitions: Iterable[int], seconds: float, per_s: float,
                     until: asyncio.Event | None = None, body: bytes | None = None) -> None:
        """One request to each partition every ``1 / per_s`` seconds, for ``seconds`` (or
        until ``until`` is set)."""
        parts = list(partitions)
        begin = time.monotonic()
        i = 0
        while time.monotonic() - begin < seconds and not (until and until.is_set()):
            await asyncio.gather(*(self.send(p, body=body) for p in parts))
            i += 1
            await asyncio.sleep(max(0.0, begin + i / per_s - time.monotonic()))

    def unanswered(self) -> list[Sent]:
        return [s for s in self.sent.values() if not s.replies]

    def answered_twice(self) -> list[Sent]:
        return [s for s in self.sent.values() if len(s.replies) > 1]

    def max_latency(self, partitions: Iterable[int], since: float = 0.0) -> float:
        wanted = set(partitions)
        return max((s.latency or float("inf") for s in self.sent.values()
                    if s.partition in wanted and s.at >= since), default=0.0)


def route_to_memos(worker: Any, agent_id: str) -> None:
    """Configure the agent's long memory on MemOS, through the agent-config topic."""
    out = subprocess.run(
        [sys.executable, "-m", "streams.cli", "agent-config", "set", "--tenant", "t1",
         "--agent", agent_id, "--provider", "MEMOS", "--open-long-memory", "on",
         "--model", "m"], env={**os.environ, **worker.env}, cwd=ROOT,
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


async def routed_to_memos(traffic: QueryTraffic, agent_id: str) -> bool:
    """A reply for the agent came from MemOS (the worker has seen its configuration)."""
    cid = await traffic.send(0, body=query_body(5000, agent_id=agent_id))
    await eventually(lambda: bool(traffic.sent[cid].replies), 20, "a reply")
    return bool(traffic.sent[cid].bodies[0]["long_term"]["provider"] == "memos")


def health(worker: Any, which: str) -> tuple[int, dict[str, Any]]:
    port = worker.env["MEMSTREAM_WEB__PORT"]
    try:
        r = httpx.get(f"http://127.0.0.1:{port}/health/{which}", timeout=5)
    except httpx.HTTPError:
        return 0, {}
    return r.status_code, r.json()


def query_partitions(worker: Any) -> list[int] | None:
    """The query partitions a worker answers, once it is ready."""
    status, body = health(worker, "ready")
    return list(body["query"]["partitions"]) if status == 200 else None


async def two_workers(stack: Stack, env: dict[str, str]) -> tuple[Any, Any]:
    """Two workers started with ``env``, once they hold the query partitions between them."""
    first = await asyncio.to_thread(stack.worker(**env).start)
    second = await asyncio.to_thread(stack.worker(**env).start)
    every = set(range(stack.partitions))

    def split() -> bool:
        a, b = query_partitions(first), query_partitions(second)
        return bool(a) and bool(b) and set(a) | set(b) == every and not set(a) & set(b)

    await eventually(split, 60, "both workers answering queries")
    return first, second


def metric(worker: Any, name: str) -> float:
    port = worker.env["MEMSTREAM_WEB__PORT"]
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0
