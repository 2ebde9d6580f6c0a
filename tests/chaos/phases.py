"""The two chaos phases, each in a namespace of its own (topics, consumer group,
database, Redis prefix).

Every worker paces one tenant's events (``PACED_ENV``: over a quota of events,
held back and taken in later, in order).

* **undisturbed** — one worker on the shared services; the workload published
  at once; wait until it settled; a snapshot from the outside.
* **disturbed** — a private Redis and MariaDB (they are restarted), two or
  more workers in one group, the workload at a steady rate with queries
  alongside, and the fault schedule; wait until it settled; a snapshot.

"Settled" is exact for a correct run — every message stored, every session
end consolidated, every poison record dead-lettered, every query answered,
every input partition consumed to its end by every group — and otherwise the
moment nothing has moved for ``stall_s`` (or ``settle_max_s`` passed): the
checks then say what is missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.chaos.checks import NONE, Erased
from tests.chaos.config import ChaosConfig
from tests.chaos.erasing import ErasureDriver, after_erasure
from tests.chaos.erasure_checks import erased_events
from tests.chaos.faults import MOVE_STAY_S, Cluster, FaultDriver, compact_quickly
from tests.chaos.observe import Observer, Progress
from tests.chaos.schedule import Fault, fault_schedule
from tests.chaos.snapshot import DeadlineTally, Snapshot
from tests.chaos.traffic import (
    DeadlineCallers,
    DeadlineClass,
    QuerySender,
    Timeline,
    create_topic,
    publish,
)
from tests.chaos.workload import Workload
from tests.integration.conftest import Stack
from tests.support.services import (
    REDIS_PORT,
    PrivateMariaDB,
    PrivateRedis,
    create_database,
    delete_topics_containing,
    drop_database,
    free_port,
    mysql_url,
    unique,
)

WORKER_ENV = {
    # sessions end only by their explicit session_end: the outcome must not depend on timing
    "MEMSTREAM_CONSOLIDATION__IDLE_TIMEOUT_S": "86400",
    # a consolidation sent to the retry topic comes back within the run
    "MEMSTREAM_CONSOLIDATION__RETRY_BACKOFF_INITIAL_S": "1",
    "MEMSTREAM_CONSOLIDATION__RETRY_BACKOFF_MAX_S": "4",
}
PACED_TENANT = "globex"
PACED_ENV = {
    # one tenant's events over a quota of events, held back and taken in later in
    # order (MEMSTREAM_QUOTAS__EVENTS_OVER_QUOTA=delay) through every kill and rebalance
    "MEMSTREAM_QUOTAS__TENANT_OVERRIDES": json.dumps(
        {PACED_TENANT: {"events_per_s": 30, "events_burst": 60}}),
    # a phase publishing faster than the tenant's rate holds its events for as long as
    # they take: held all the same rather than dead-lettered
    "MEMSTREAM_QUOTAS__EVENTS_HELD_MAX_S": "300",
}
# the undisturbed phase: the same tenant over a quota twice as large (it is held back
# all the same, its events published at once), so the reference is there in half the time
PACED_UNDISTURBED_ENV = {
    "MEMSTREAM_QUOTAS__TENANT_OVERRIDES": json.dumps(
        {PACED_TENANT: {"events_per_s": 60, "events_burst": 60}}),
}
EXPIRING_ENV = {
    # a conversation quiet for 5 s after its session closed leaves the sessions table
    # (the returning ones speak again after that: their numbers come from the database)
    "MEMSTREAM_CONSOLIDATION__CLOSED_SESSION_RETENTION_S": "5",
    "MEMSTREAM_CONSOLIDATION__IDLE_SCAN_INTERVAL_S": "1",
}
PARTITIONS = 8
SETTLED_FOR_S = 8.0
"""Complete this long before a phase counts as settled: the expiry checks of the
last closed states (5 s after their last event) come and are consumed meanwhile."""


@dataclass
class PhaseResult:
    name: str
    snapshot: Snapshot
    timeline: Timeline
    settled: str  # complete, stalled or timed out
    seconds: float
    detail: str = ""


def _stack(name: str, tmp: Path, database: str, db_url: str, redis_url: str,
           env: dict[str, str] | None = None) -> Stack:
    return Stack(name=name, tmp=tmp, partitions=PARTITIONS, database=database,
                 redis_url=redis_url,
                 extra_env={**WORKER_ENV, **PACED_ENV, **(env or {}),
                            "MEMSTREAM_DATABASE__URL": db_url})


def _topics(stack: Stack) -> dict[str, str]:
    t = stack.topics
    return {role: t[role] for role in ("chat", "idle", "closed", "retry", "subagent")}


def _observer(stack: Stack, db_url: str, redis_url: str) -> Observer:
    t = stack.topics
    return Observer(db_url=db_url, redis_url=redis_url, redis_prefix=stack.name,
                    input_topics=[t[k] for k in ("chat", "subagent", "idle", "closed", "retry",
                                                 "queries")],
                    dlq_topic=t["dlq"], reply_topic=f"{stack.name}.replies")


def _complete(p: Progress, w: Workload, queries: int, erased: Erased) -> bool:
    touched = sum(1 for x in w.sessions
                  if any((x.conversation.tenant, e) in erased for e in x.event_ids))
    return (p.messages >= len(w.messages) - len(erased)
            and p.done_runs >= len(w.sessions) - touched
            and p.open_runs == 0 and p.dead_letters >= len(w.poison)
            and p.replies >= queries and p.behind == 0)


async def settle(observer: Observer, w: Workload, cfg: ChaosConfig, timeline: Timeline,
                 queries: Callable[[], int] = lambda: 0, erased: Erased = NONE) -> str:
    loop = asyncio.get_running_loop()
    began = last_move = loop.time()
    last: Progress | None = None
    complete_since: float | None = None
    while True:
        try:
            p: Progress | None = await observer.progress()
        except Exception as exc:  # a database still coming back: no progress seen
            timeline.note(f"progress unreadable: {type(exc).__name__}: {exc}")
            p = None
        now = loop.time()
        if p is not None and _complete(p, w, queries(), erased):
            complete_since = now if complete_since is None else complete_since
            if now - complete_since >= SETTLED_FOR_S:
                timeline.note(f"settled: {p}")
                return "complete"
        else:
            complete_since = None
        if p != last:
            last, last_move = p, now
        elif now - last_move > cfg.stall_s:
            timeline.note(f"no progress for {cfg.stall_s:.0f}s: {p}")
            return f"stalled ({p})"
        if now - began > cfg.settle_max_s:
            timeline.note(f"still moving after {cfg.settle_max_s:.0f}s: {p}")
            return f"timed out ({p})"
        await asyncio.sleep(1.0)


async def undisturbed(w: Workload, cfg: ChaosConfig, tmp: Path) -> PhaseResult:
    started = time.monotonic()
    name = unique("chaosa")
    database = f"ms_{name}"
    redis_url = f"redis://127.0.0.1:{REDIS_PORT}/0"
    db_url = create_database(database)
    stack = _stack(name, tmp, database, db_url, redis_url, PACED_UNDISTURBED_ENV)
    timeline = Timeline()
    cluster = Cluster(stack, timeline)
    observer = _observer(stack, db_url, redis_url)
    try:
        await cluster.start(must=True)
        await create_topic(observer.reply_topic, 1)
        await publish(w, _topics(stack), timeline)
        timeline.note(f"published {len(w.records)} records")
        settled = await settle(observer, w, cfg, timeline)
        snap = await observer.snapshot([])
        snap.held_back, snap.rejoins = await live_counts(cluster)
    finally:
        cluster.kill_all()
        await observer.close()
        await observer.forget_redis()
        drop_database(database)
        await delete_topics_containing(name)
    return PhaseResult("A undisturbed", snap, timeline, settled, time.monotonic() - started)


async def live_counts(cluster: Cluster) -> tuple[int, int]:
    """The paced tenant's events the live workers held back, and the rebalances they
    asked for because records were passed over (their counts since they started: a
    worker killed took its own with it)."""
    series = ('memstream_quota_decisions_total{decision="delayed",quota="events",'
              f'tenant="{PACED_TENANT}"}} ')
    rejoins = "memstream_group_rejoins_total "
    held = asked = 0
    async with httpx.AsyncClient(timeout=10) as http:
        for slot in cluster.live():
            text = (await http.get(f"http://127.0.0.1:{slot.port}/metrics")).text
            for line in text.splitlines():
                if line.startswith(series):
                    held += int(float(line[len(series):]))
                elif line.startswith(rejoins):
                    asked += int(float(line[len(rejoins):]))
    return held, asked


def tally(c: DeadlineClass, started: float, outages: list[tuple[float, float]],
          rebalances: list[tuple[float, float]]) -> DeadlineTally:
    """``c``'s outcomes; a query asked while no worker was live, or within its deadline
    before, is counted apart: nothing could answer it. One asked while the query group
    was rebalancing (workers live, none holding query partitions) counts like any other
    — the workers take such requests over — and is also reported apart."""
    def within(at: float, spans: list[tuple[float, float]]) -> bool:
        return any(begin - c.deadline_s <= at <= end for begin, end in spans)

    answered = [o.latency_s for _, o in c.outcomes if o.answered]
    out = [at for at, _ in c.outcomes if within(at, outages)]
    moving = [at for at, _ in c.outcomes if not within(at, outages) and within(at, rebalances)]
    late_ones = [(at, o) for at, o in c.outcomes if not o.answered and at not in out]
    late = [at for at, _ in late_ones]
    return DeadlineTally(
        c.name, c.deadline_s, c.late_allowed, len(c.outcomes), len(late),
        [round(at - started, 1) for at in late],
        len(out), sum(1 for at in c.late() if at in out),
        len(moving), sum(1 for at in c.late() if at in moving), max(answered, default=0.0),
        c.stats.hedges_sent, c.stats.hedges_won, c.stats.duplicates_dropped,
        sorted(((o.latency_s, round(at - started, 1)) for at, o in c.outcomes if o.answered),
               reverse=True)[:3],
        [f"{at - started:.1f} s: partition {o.partition}, {'hedged' if o.hedged else 'not hedged'}"
         for at, o in late_ones])


LATE_AT_300_MS = 0.10
"""Share of the 300 ms callers' queries asked while a worker was live that may come
late: every process of the test (broker, databases, workers, callers) shares two
cores, and a worker starting beside the only live one slows it by a few hundred
milliseconds. Without hedging and take-over those asked in a rebalance or after a
SIGKILL come late: 12-30 of the 84 a run asks."""


@dataclass(frozen=True)
class Disturbance:
    """What a disturbed phase does beside the workload: its faults, whether callers
    with real deadlines ask (their timing is the promise measured) and whether the
    workload's erasures are sent."""

    name: str
    schedule: list[Fault]
    deadline_callers: bool
    erasures: bool
    rate: float
    move: bool = False
    """closed states leave the table 5 s after their last event (``EXPIRING_ENV``), the
    sessions changelog is compacted within seconds, and the returning conversations
    wait until partitions moved away and came back"""


def faults_phase(w: Workload, cfg: ChaosConfig) -> Disturbance:
    """B: every fault of the schedule, callers with real deadlines, no erasure."""
    return Disturbance("B disturbed", fault_schedule(
        w.spec.seed, kills=cfg.kills, redis_down_s=cfg.redis_down_s,
        mariadb_down_s=cfg.mariadb_down_s), deadline_callers=True, erasures=False,
        rate=cfg.rate)


def erasures_phase(w: Workload, cfg: ChaosConfig) -> Disturbance:
    """C: the workload's erasures amid a SIGKILL in the middle of a consolidation, one
    more, and a worker added then stopped (partitions away and back after states
    expired, the returning conversations held until then); no deadline callers: the
    erasures' work is not the deadline promise's load."""
    return Disturbance("C erasures", [
        Fault(0.2, "kill_consolidating", 0, 1.5), Fault(0.35, "add_worker", 0, 0.0),
        Fault(0.55, "kill", 1, 1.5), Fault(0.7, "stop_worker", 0, 0.0),
    ], deadline_callers=False, erasures=True, rate=cfg.erasure_rate, move=True)


async def disturbed(w: Workload, cfg: ChaosConfig, tmp: Path, how: Disturbance) -> PhaseResult:
    started = time.monotonic()
    name = unique("chaos" + how.name[0].lower())
    database = f"ms_{name}"
    redis = PrivateRedis(free_port(), tmp / "redis")
    mariadb = PrivateMariaDB(free_port(), tmp / "mariadb")
    timeline = Timeline()
    schedule = how.schedule
    plan = w.erasures if how.erasures else []
    erased = erased_events(w) if how.erasures else NONE
    try:
        await asyncio.gather(asyncio.to_thread(redis.start), asyncio.to_thread(mariadb.start))
        db_url = create_database(database, mariadb.port)
        assert db_url == mysql_url(database, mariadb.port)
        stack = _stack(name, tmp, database, db_url, redis.url,
                       EXPIRING_ENV if how.move else None)
        cluster = Cluster(stack, timeline, redis=redis, mariadb=mariadb)
        observer = _observer(stack, db_url, redis.url)
        try:
            await cluster.start(must=True)  # creates the topics and migrates the schema
            if how.move:  # partitions come back after states expired and were compacted
                await compact_quickly(f"{stack.name}-sessions-changelog")
            await asyncio.gather(*(cluster.start(must=True) for _ in range(cfg.workers - 1)))
            await create_topic(observer.reply_topic, 1)
            for topic in ("erasure-replies", "after-replies"):
                await create_topic(f"{stack.name}.{topic}", 1)
            timeline.started = time.monotonic()
            timeline.note(f"{len(cluster.live())} workers; schedule: "
                          + "; ".join(f.describe() for f in schedule))
            queries = QuerySender(w, stack.topics["queries"], observer.reply_topic,
                                  cfg.query_rate)
            callers = DeadlineCallers(
                w, stack.topics["queries"], f"{stack.name}.deadline-replies",
                f"{stack.name}-query",
                [DeadlineClass("1 s", 1.0), DeadlineClass("300 ms", 0.3, LATE_AT_300_MS)]
                if how.deadline_callers else [], cfg.deadline_rate)
            driver = FaultDriver(cluster, schedule, observer,
                                 stay_s=MOVE_STAY_S if how.move else 0.0)
            eraser = ErasureDriver(plan, erasures_topic=stack.topics["erasures"],
                                   reply_topic=f"{stack.name}.erasure-replies",
                                   observer=observer, timeline=timeline)
            tasks = [asyncio.create_task(queries.run(timeline.note)),
                     asyncio.create_task(callers.run()),
                     asyncio.create_task(cluster.watch_outages())]
            try:
                sending = asyncio.create_task(publish(w, _topics(stack), timeline, how.rate,
                                                      driver.moved_back if how.move else None))
                tasks.append(sending)
                faults = asyncio.create_task(driver.run())
                tasks.append(faults)
                erasing = asyncio.create_task(eraser.run())
                tasks.append(erasing)
                await sending
                timeline.note(f"published {len(w.records)} records")
                await faults
                timeline.note(f"faults done: {driver.kills} SIGKILLs, "
                              f"{len(cluster.live())} workers live")
                await erasing
                queries.stop()
                callers.stop()
                await tasks[0]
                await tasks[1]
                timeline.note(f"{len(queries.sent)} queries sent; deadline callers asked "
                              + ", ".join(f"{len(c.outcomes)} ({c.name})"
                                          for c in callers.classes))
            finally:
                for t in tasks:
                    t.cancel()
                for t in tasks:
                    with contextlib.suppress(BaseException):
                        await t
                await driver.cancel()
            settled = await settle(observer, w, cfg, timeline, lambda: len(queries.sent),
                                   erased)
            snap = await observer.snapshot(queries.sent)
            snap.held_back, snap.rejoins = await live_counts(cluster)
            snap.erasures = [(o.planned.describe(), o.status) for o in eraser.outcomes]
            snap.erased_memories = [o.memory for o in eraser.outcomes if o.memory is not None]
            if plan:
                after = await after_erasure(w, observer, stack.topics["queries"],
                                            f"{stack.name}.after-replies", PARTITIONS,
                                            eraser.outcomes)
                snap.after_erasure, snap.leftovers = after.replies, after.leftovers
            snap.deadline = [tally(c, timeline.started, cluster.outages, cluster.rebalances)
                             for c in callers.classes]
        finally:
            cluster.kill_all()
            await observer.close()
            await delete_topics_containing(name)
    finally:
        redis.stop()
        mariadb.remove()
    detail = (f"{driver.kills} SIGKILLs; the aimed one left "
              f"{', '.join(driver.aimed) or 'no run'} unfinished"
              + (f"; faults not done: {', '.join(driver.skipped)}" if driver.skipped else ""))
    return PhaseResult(how.name, snap, timeline, settled, time.monotonic() - started, detail)
