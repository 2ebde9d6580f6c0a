"""What the benchmark harnesses (LoCoMo, BEAM) share: publishing chat events
through Kafka, waiting until their sessions are consolidated, asking questions
through the query topic in closed or open loop, and printing progress.

Closed loop keeps ``in_flight`` requests outstanding; open loop (``rate``)
sends request ``i`` at ``i / rate`` seconds after the first, whether or not
earlier ones were answered. Either way a request's latency runs from its own
send to its reply. A request the worker never answers (its deadline passed
while it waited in the topic) is counted as unanswered, not timed.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import func, select

from streams.adapters.db.engine import create_engine
from streams.adapters.db.schema.consolidation import consolidation_run
from streams.adapters.db.schema.memory import memory
from streams.adapters.kafka.clients import kafka_security, publish_events
from streams.client import MemoryClient, QueryTimeoutError
from streams.consolidation.rules.dedup import split_speaker
from streams.consolidation.rules.fact_quality import defect
from streams.settings import Settings
from streams.wire.query import MemoryReply

T = TypeVar("T")
R = TypeVar("R")
Progress = Callable[[str], None]
PROGRESS_EVERY = 50  # questions between two progress lines
PROGRESS_EVERY_S = 10.0  # seconds between two lines on consolidation


def stderr_progress(msg: str) -> None:
    print(f"  {msg}", file=sys.stderr, flush=True)


def sessions_to_consolidate(events: Iterable[Mapping[str, Any]]) -> int:
    """The session ends that close a session with messages, per conversation: a
    session end with nothing before it (since the previous one) consolidates nothing."""
    open_: set[tuple[Any, Any]] = set()
    ends = 0
    for e in events:
        conv = (e.get("tenant_id"), e.get("conversation_id"))
        if e.get("type") == "session_end":
            if conv in open_:
                ends += 1
                open_.discard(conv)
        else:
            open_.add(conv)
    return ends


async def publish(settings: Settings, events: Sequence[Mapping[str, Any]]) -> int:
    """Publish chat events keyed by conversation, as a chat platform would; returns
    how many sessions they close (:func:`sessions_to_consolidate`)."""
    await publish_events(settings.kafka, [dict(e) for e in events])
    return sessions_to_consolidate(events)


async def consolidated_sessions(settings: Settings, tenant: str) -> int:
    engine = create_engine(settings.database)
    try:
        async with engine.connect() as conn:
            q = select(func.count()).select_from(consolidation_run).where(
                consolidation_run.c.tenant_id == tenant, consolidation_run.c.status == "done")
            return int((await conn.execute(q)).scalar_one())
    except Exception:  # the schema may not exist yet
        return 0
    finally:
        await engine.dispose()


async def fact_quality(settings: Settings, tenant: str) -> dict[str, Any]:
    """The facts consolidation wrote for ``tenant`` (valid or retired since), and the
    share a reader would keep: those :func:`~streams.consolidation.rules.fact_quality.
    defect` finds nothing wanting in (the ``"Name: "`` of a named speaker left out),
    with the count of each defect of the others."""
    engine = create_engine(settings.database)
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(select(memory.c.content).where(
                memory.c.tenant_id == tenant, memory.c.kind == "fact"))).all()
    finally:
        await engine.dispose()
    wanting = Counter(d for r in rows if (d := defect(split_speaker(r.content)[1])) is not None)
    n = len(rows)
    return {"facts": n, "facts_kept": round((n - sum(wanting.values())) / n, 4) if n else None,
            "facts_wanting": dict(wanting.most_common())}


def render_facts(doc: Mapping[str, Any]) -> str:
    kept = doc.get("facts_kept")
    share = f"{kept:.1%}" if kept is not None else "-"
    why = ", ".join(f"{k} {v}" for k, v in doc.get("facts_wanting", {}).items())
    return (f"facts: {doc.get('facts', 0)} written, {share} a reader would keep"
            + (f" (the others: {why})" if why else ""))


async def wait_for_consolidation(settings: Settings, tenant: str, expected: int,
                                 timeout_s: float, progress: Progress,
                                 alive: Callable[[], bool] = lambda: True) -> float:
    """Wait until ``expected`` sessions of ``tenant`` are consolidated (a progress line
    every ``PROGRESS_EVERY_S`` at most); the seconds it took."""
    start = time.monotonic()
    deadline = start + timeout_s
    last, shown = -1, -PROGRESS_EVERY_S
    while time.monotonic() < deadline:
        done = await consolidated_sessions(settings, tenant)
        now = time.monotonic()
        if done != last and (now - shown >= PROGRESS_EVERY_S or done >= expected):
            progress(f"consolidated {done}/{expected} sessions")
            shown = now
        last = done
        if done >= expected:
            return time.monotonic() - start
        if not alive():
            raise RuntimeError("the worker stopped")
        await asyncio.sleep(1.0)
    raise TimeoutError(f"only {last} of {expected} sessions consolidated in time")


def memory_client(settings: Settings, timeout_s: float) -> MemoryClient:
    """A client of the configured query and reply topics, as an agent would use."""
    return MemoryClient(settings.kafka.broker, request_topic=settings.kafka.queries_topic,
                        reply_topic=settings.query.reply_topic, timeout_s=timeout_s,
                        security=kafka_security(settings.kafka))


async def checked_query(client: MemoryClient, **query: Any) -> MemoryReply:
    """``client.query(**query)``; a reply carrying an error stops the run."""
    reply = await client.query(**query)
    if reply.error is not None:
        raise RuntimeError(f"query failed: {reply.error.code}: {reply.error.message}")
    return reply


@dataclass(frozen=True)
class Arrivals:
    """How requests arrive: ``in_flight`` at once (closed loop), or ``rate`` per
    second whatever the replies (open loop)."""

    in_flight: int = 4
    rate: float | None = None

    def describe(self) -> str:
        return (f"open loop, {self.rate:g} requests/s" if self.rate
                else f"closed loop, {self.in_flight} in flight")


@dataclass(frozen=True)
class Timed(Generic[R]):
    """One request's outcome: its result (None when unanswered) and latency."""

    result: R | None
    latency_ms: float

    @property
    def answered(self) -> bool:
        return self.result is not None


async def send_all(items: Sequence[T], ask: Callable[[T], Awaitable[R]], arrivals: Arrivals,
                   progress: Progress, what: str = "questions") -> list[Timed[R]]:
    """``ask`` each item as ``arrivals`` says; the outcomes in the items' order."""
    if arrivals.rate is not None and arrivals.rate <= 0:
        raise ValueError("the rate must be positive")
    if arrivals.in_flight < 1:
        raise ValueError("at least one request must be in flight")
    out: list[Timed[R] | None] = [None] * len(items)
    finished = 0

    async def one(i: int) -> None:
        nonlocal finished
        start = time.perf_counter()
        try:
            result: R | None = await ask(items[i])
        except QueryTimeoutError:
            result = None
        out[i] = Timed(result, (time.perf_counter() - start) * 1000)
        finished += 1
        if finished % PROGRESS_EVERY == 0 or finished == len(items):
            progress(f"asked {finished}/{len(items)} {what}")

    if arrivals.rate is None:
        sem = asyncio.Semaphore(arrivals.in_flight)

        async def bounded(i: int) -> None:
            async with sem:
                await one(i)

        await asyncio.gather(*(bounded(i) for i in range(len(items))))
    else:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        tasks = []
        for i in range(len(items)):
            await asyncio.sleep(max(0.0, t0 + i / arrivals.rate - loop.time()))
            tasks.append(asyncio.ensure_future(one(i)))
        await asyncio.gather(*tasks)
    return [t for t in out if t is not None]
