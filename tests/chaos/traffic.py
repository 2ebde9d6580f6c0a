"""Load for a chaos phase: the workload published at a steady rate, memory
queries over the public request/reply contract (Spring Kafka's headers), with
their replies left on a reply topic for the checks to count, and callers with
real deadlines (``MemoryClient``, 1 s and 300 ms) counting what they got in time."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from streams.client import (
    HEDGE_AFTER_S,
    ClientStats,
    MemoryClient,
    QueryOutcome,
    QueryTimeoutError,
)
from streams.wire.query import MAX_TIMEOUT_MS, MemoryReply
from streams.wire.spring_reply import request_headers
from tests.chaos import vocabulary as V
from tests.chaos.workload import Workload
from tests.support.services import KAFKA_BOOTSTRAP

TICK_S = 0.05


class Timeline:
    """What happened when, for the report: seconds since the phase began and how
    much of the workload was published."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.published = 0.0
        self.lines: list[str] = []
        self._waiting: list[tuple[float, asyncio.Future[None]]] = []

    def advance(self, share: float) -> None:
        self.published = share
        for _, fut in [w for w in self._waiting if w[0] <= share]:
            if not fut.done():
                fut.set_result(None)
        self._waiting = [w for w in self._waiting if w[0] > share]

    async def reached(self, share: float) -> None:
        """Returns once ``share`` of the workload has been published."""
        if self.published >= share:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((share, fut))
        await fut

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def note(self, what: str) -> None:
        self.lines.append(f"{self.elapsed():7.1f}s {self.published:6.1%}  {what}")


async def create_topic(name: str, partitions: int) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=KAFKA_BOOTSTRAP)
    await admin.start()
    try:
        if name not in await admin.list_topics():
            await admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        await admin.close()


def _producer() -> AIOKafkaProducer:
    # idempotent: a retried send never puts a record on the topic twice, so what the
    # checks expect is exactly what was produced
    return AIOKafkaProducer(bootstrap_servers=KAFKA_BOOTSTRAP, acks="all",
                            enable_idempotence=True, linger_ms=5)


HOLD_MAX_S = 300.0


async def publish(workload: Workload, topics: dict[str, str], timeline: Timeline,
                  rate: float | None = None, hold: asyncio.Event | None = None) -> None:
    """Every record of the workload, in order, at ``rate`` records/s (None: at once);
    ``timeline.published`` follows the share sent. With ``hold``, the returning
    conversations' last sessions (from ``workload.late_from``) wait until it is set
    (at most ``HOLD_MAX_S``), then go on at the rate."""
    producer = _producer()
    await producer.start()
    try:
        sent: list[asyncio.Future[object]] = []
        total = len(workload.records)
        began = time.monotonic()
        for i, r in enumerate(workload.records):
            if hold is not None and i == workload.late_from:
                timeline.note("returning conversations wait for the partitions to come back")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(hold.wait(), HOLD_MAX_S)
                timeline.note("returning conversations go on"
                              + ("" if hold.is_set() else f" (after {HOLD_MAX_S:.0f}s)"))
                began = time.monotonic() - i / rate if rate else began
            if rate is not None and i % max(1, int(rate * TICK_S)) == 0:
                due = began + i / rate
                if (wait := due - time.monotonic()) > 0:
                    await asyncio.sleep(wait)
            sent.append(await producer.send(topics[r.topic], r.value, key=r.key))
            timeline.advance((i + 1) / total)
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


def query_request(workload: Workload, n: int) -> tuple[bytes, bytes]:
    """Query ``n`` (key, value): a user of the workload asks, in one of their conversations."""
    rng = random.Random(f"query-{workload.spec.seed}-{n}")
    c = rng.choice(workload.conversations)
    doc = {"request_id": f"q{n}", "tenant_id": c.tenant, "user_id": c.user, "agent_id": c.agent,
           "conversation_id": c.id, "message": rng.choice(V.QUESTIONS),
           # the longest a caller may wait: a schedule can leave the query stage
           # without a live member for tens of seconds (the only worker killed
           # again and again, the database down meanwhile), and a request whose
           # caller gave up is rightly not answered
           "options": {"timeout_ms": MAX_TIMEOUT_MS, "top_k": 5}}
    return f"{c.tenant}/{c.user}".encode(), json.dumps(doc).encode()


class QuerySender:
    """Sends query after query at ``rate``/s until stopped; remembers the correlation ids."""

    def __init__(self, workload: Workload, queries_topic: str, reply_topic: str,
                 rate: float) -> None:
        self.workload = workload
        self.queries_topic = queries_topic
        self.reply_topic = reply_topic
        self.rate = rate
        self.sent: list[bytes] = []
        self._stop = asyncio.Event()

    def stop(self) -> None:
        self._stop.set()

    async def run(self, on_error: Callable[[str], None]) -> None:
        producer = _producer()
        await producer.start()
        try:
            began = time.monotonic()
            n = 0
            while not self._stop.is_set():
                key, value = query_request(self.workload, n)
                cid = f"chaos-q{n}".encode()
                try:
                    await producer.send_and_wait(self.queries_topic, value, key=key,
                                                 headers=request_headers(self.reply_topic, cid))
                    self.sent.append(cid)
                except Exception as exc:  # the broker is not disturbed; say so if it fails
                    on_error(f"query {n} not sent: {type(exc).__name__}: {exc}")
                n += 1
                due = began + n / self.rate
                if (wait := due - time.monotonic()) > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), wait)
        finally:
            await producer.stop()


@dataclass
class DeadlineClass:
    """Callers that wait ``deadline_s`` for each reply, as a chat service before a model turn."""

    name: str
    deadline_s: float
    late_allowed: float = 0.0
    """share of the queries asked while a worker was live that may come late"""
    outcomes: list[tuple[float, QueryOutcome]] = field(default_factory=list)
    """(when it was asked, monotonic; what came of it)"""
    stats: ClientStats = field(default_factory=ClientStats)
    replies: Counter[str] = field(default_factory=Counter)
    """the replies received, by :func:`reply_kind`"""

    def record(self, outcome: QueryOutcome) -> None:
        self.outcomes.append((time.monotonic() - outcome.latency_s, outcome))

    def late(self) -> list[float]:
        """When each query not answered in time was asked (monotonic)."""
        return [at for at, o in self.outcomes if not o.answered]


class DeadlineCallers:
    """``MemoryClient`` callers of each class asking at ``rate``/s until stopped, hedged as
    the client is by default (after a quarter of a second, or a third of a shorter
    deadline); the replies go to their own topic."""

    def __init__(self, workload: Workload, queries_topic: str, reply_topic: str, group: str,
                 classes: list[DeadlineClass], rate: float) -> None:
        self.workload = workload
        self.queries_topic = queries_topic
        self.reply_topic = reply_topic
        self.group = group
        self.classes = classes
        self.rate = rate
        self._stop = asyncio.Event()

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        await asyncio.gather(*(self._run(c, i) for i, c in enumerate(self.classes)))

    async def _run(self, c: DeadlineClass, index: int) -> None:
        client = MemoryClient(
            KAFKA_BOOTSTRAP, request_topic=self.queries_topic, reply_topic=self.reply_topic,
            reply_partitions=1, timeout_s=c.deadline_s, query_group=self.group,
            hedge_after_s=min(HEDGE_AFTER_S, c.deadline_s / 3), on_outcome=c.record)
        client.stats = c.stats
        asking: set[asyncio.Task[None]] = set()
        async with client:
            began = time.monotonic()
            n = 0
            while not self._stop.is_set():
                key, value = query_request(self.workload, 1_000_000 * (index + 1) + n)
                doc = json.loads(value)
                doc["options"]["timeout_ms"] = int(c.deadline_s * 1000)
                task = asyncio.create_task(self._ask(client, key, json.dumps(doc).encode(), c))
                asking.add(task)
                task.add_done_callback(asking.discard)
                n += 1
                due = began + n / self.rate
                if (wait := due - time.monotonic()) > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), wait)
            if asking:
                await asyncio.gather(*asking)

    @staticmethod
    async def _ask(client: MemoryClient, key: bytes, value: bytes, c: DeadlineClass) -> None:
        with contextlib.suppress(QueryTimeoutError):  # the outcome is counted by the client
            reply = await client.send_raw(value, key=key, timeout_s=c.deadline_s)
            c.replies[reply_kind(reply)] += 1


DEGRADED = ("long_term_failed", "short_term_failed")


def reply_kind(reply: MemoryReply) -> str:
    """``ok``; the error's code; or ``degraded: <warning>`` when a part of the answer
    failed (the caller got less than it asked for)."""
    if reply.error is not None:
        return reply.error.code
    failed = sorted(w.code for w in reply.warnings if w.code in DEGRADED)
    return f"degraded: {', '.join(failed)}" if failed else "ok"
