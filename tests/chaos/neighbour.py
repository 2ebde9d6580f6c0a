"""One phase of the noisy-neighbour run: one worker, calm's load, and loud's beside
it when the configuration has any; in a namespace of its own (topics, consumer
group, database, Redis prefix), as the chaos phases are.

The worker runs under :class:`~tests.chaos.watchdog.RssWatchdog`. Calm's chat
and queries (``DeadlineCallers``, 1 s) run ``seconds``; loud begins
``loud_after_s`` later. Then the phase waits until calm's messages are stored
and its sessions consolidated, and loud's messages stored (or dead-lettered)
and every run of loud's done — or until nothing moved for ``stall_s`` — and
reads its figures from the outside (:mod:`.neighbour_figures`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

from sqlalchemy import func, select

from streams.adapters.db.schema.consolidation import consolidation_run
from streams.adapters.db.schema.conversation import conversation_message
from streams.adapters.db.schema.memory import memory
from streams.client import MemoryClient, QueryTimeoutError
from tests.chaos.config import WorkloadSpec
from tests.chaos.faults import Cluster
from tests.chaos.neighbour_figures import PhaseFigures, read_figures
from tests.chaos.observe import Observer
from tests.chaos.phases import PARTITIONS, WORKER_ENV
from tests.chaos.stolen import StolenTime
from tests.chaos.tenants import (
    AGENT,
    CALM,
    LOUD,
    CalmChat,
    Erasures,
    NeighbourConfig,
    calm_conversations,
    flood,
    loud_session,
)
from tests.chaos.traffic import DeadlineCallers, DeadlineClass, Timeline, create_topic
from tests.chaos.watchdog import RssWatchdog
from tests.chaos.workload import Workload
from tests.integration.conftest import Stack
from tests.support.services import (
    KAFKA_BOOTSTRAP,
    REDIS_PORT,
    create_database,
    delete_topics_containing,
    drop_database,
    unique,
)

QUIET_POLLS = 5


async def _warm(client: MemoryClient, limit_s: float = 120.0) -> None:
    """Until the worker answers a query on every query partition (its group formed)."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            await asyncio.gather(*(client.query(
                tenant_id=CALM, user_id=f"warm{p}", agent_id=AGENT, message="hello",
                timeout_s=5.0, include_short_term=False) for p in range(2 * PARTITIONS)))
            return
        except QueryTimeoutError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(1.0)


class Waits:
    """The settle wait's questions to SQL, by tenant."""

    def __init__(self, observer: Observer) -> None:
        self.observer = observer

    async def counts(self) -> tuple[int, ...]:
        m, r = conversation_message.c, consolidation_run.c
        async with self.observer.engine().connect() as conn:
            stored = dict((await conn.execute(select(m.tenant_id, func.count()).group_by(
                m.tenant_id))).all())
            runs = (await conn.execute(select(
                r.tenant_id, r.status, func.count(), func.sum(r.message_count))
                .group_by(r.tenant_id, r.status))).all()
        done = {t: int(n) for t, s, n, _ in runs if s == "done"}
        covered = {t: int(k or 0) for t, s, _, k in runs if s == "done"}
        open_ = {t: int(n) for t, s, n, _ in runs if s != "done"}
        replies = sum((await self.observer._ends([self.observer.reply_topic])).values())
        return (int(stored.get(CALM, 0)), done.get(CALM, 0), open_.get(CALM, 0),
                int(stored.get(LOUD, 0)), covered.get(LOUD, 0), open_.get(LOUD, 0), replies)

    async def pick_memory(self, erased: set[str]) -> str | None:
        """The newest live memory of loud's not erased yet."""
        mem = memory.c
        async with self.observer.engine().connect() as conn:
            rows = (await conn.execute(select(mem.id).where(
                mem.tenant_id == LOUD, mem.valid_to.is_(None)).order_by(mem.id.desc())
                .limit(len(erased) + 1))).all()
        return next((str(x.id) for x in rows if str(x.id) not in erased), None)


async def settle(waits: Waits, calm: CalmChat, loud_sent: int, flood_sent: int,
                 cfg: NeighbourConfig, timeline: Timeline) -> str:
    """Until calm's and loud's chat is stored and consolidated and loud's flood has a
    reply each or none came for ``QUIET_POLLS`` seconds (the rest waited past their
    ``timeout_ms`` and are dropped); or until nothing moved for ``stall_s``."""
    loop = asyncio.get_running_loop()
    began = last_move = loop.time()
    last: tuple[int, ...] | None = None
    quiet = 0
    while True:
        c = await waits.counts()
        calm_stored, calm_done, calm_open, loud_stored, loud_covered, loud_open, replies = c
        quiet = quiet + 1 if last is not None and replies == last[-1] else 0
        if (calm_stored >= len(calm.sent) and calm_done >= len(calm.ended) and calm_open == 0
                and loud_covered >= loud_stored >= loud_sent and loud_open == 0
                and (replies >= flood_sent or quiet >= QUIET_POLLS)):
            timeline.note(f"settled: {c}")
            return "complete"
        now = loop.time()
        if c != last:
            last, last_move = c, now
        elif now - last_move > cfg.stall_s:
            timeline.note(f"no progress for {cfg.stall_s:.0f}s: {c}")
            return f"stalled {c}"
        if now - began > cfg.settle_max_s:
            timeline.note(f"still moving after {cfg.settle_max_s:.0f}s: {c}")
            return f"timed out {c}"
        await asyncio.sleep(1.0)


async def run_phase(name: str, cfg: NeighbourConfig, tmp: Path) -> PhaseFigures:
    started = time.monotonic()
    ns = unique("nbr")
    database = f"ms_{ns}"
    redis_url = f"redis://127.0.0.1:{REDIS_PORT}/0"
    db_url = create_database(database)
    stack = Stack(name=ns, tmp=tmp, partitions=PARTITIONS, database=database,
                  redis_url=redis_url, extra_env={
                      **WORKER_ENV, "MEMSTREAM_DATABASE__URL": db_url,
                      # the pod of a multi-tenant deployment: queries in a process of their
                      # own, beside the worker, under the one memory limit
                      "MEMSTREAM_QUERY__PROCESS": cfg.query_process})
    t = stack.topics
    timeline = Timeline()
    cluster = Cluster(stack, timeline)
    observer = Observer(db_url=db_url, redis_url=redis_url, redis_prefix=ns,
                        input_topics=[t["chat"], t["queries"]], dlq_topic=t["dlq"],
                        reply_topic=f"{ns}.loud-replies")
    waits = Waits(observer)
    calm = CalmChat(cfg, t["chat"])
    callers = DeadlineCallers(
        Workload(WorkloadSpec(), [], [], [], [], calm_conversations(cfg.calm_users)),
        t["queries"], f"{ns}.calm-replies", f"{ns}-query", [DeadlineClass("1 s", cfg.deadline_s)],
        cfg.query_rate)
    erasures = Erasures()
    stolen = StolenTime()
    stop, background = asyncio.Event(), []
    loud_sent = flood_sent = 0
    try:
        slot = await cluster.start(must=True)
        for topic in (observer.reply_topic, f"{ns}.calm-replies", f"{ns}.erase-replies"):
            await create_topic(topic, 1)
        watchdog = RssWatchdog(cluster, slot, cfg.rss_limit_mb * 2**20)
        async with MemoryClient(KAFKA_BOOTSTRAP, request_topic=t["queries"],
                                erasures_topic=t["erasures"], reply_topic=f"{ns}.erase-replies",
                                reply_partitions=1, query_group=f"{ns}-query") as client:
            await _warm(client)
            timeline.started = time.monotonic()
            background.append(asyncio.create_task(watchdog.run()))
            background.append(asyncio.create_task(stolen.run()))
            chatting = asyncio.create_task(calm.run(stop))
            asking = asyncio.create_task(callers.run())
            loud: list[asyncio.Task[int]] = []
            if cfg.loud_enabled:
                await asyncio.sleep(cfg.loud_after_s)
                loud.append(asyncio.create_task(loud_session(cfg, t["chat"], timeline.note)))
                if cfg.flood_rate:
                    loud.append(asyncio.create_task(
                        flood(cfg, t["queries"], observer.reply_topic, stop)))
                if cfg.erase_every_s:
                    background.append(asyncio.create_task(
                        erasures.run(cfg, client, waits.pick_memory, stop)))
            await asyncio.sleep(max(0.0, cfg.seconds - timeline.elapsed()))
            stop.set()
            callers.stop()
            await chatting
            await asyncio.gather(asking, *loud)
            if loud:
                loud_sent = loud[0].result()
            if cfg.flood_rate:
                flood_sent = loud[1].result()
            timeline.note(f"traffic done: calm {len(calm.sent)} messages, {len(calm.ended)} "
                          f"sessions; loud {loud_sent} messages, {flood_sent} flood queries, "
                          f"{erasures.asked} erasures asked")
            settled = await settle(waits, calm, loud_sent, flood_sent, cfg, timeline)
            await erasures.wait(max(10.0, cfg.stall_s))
        figures = await read_figures(name, observer, calm, callers.classes[0], loud_sent,
                                     flood_sent, erasures, watchdog, timeline.started, stolen)
        figures.settled = settled
    finally:
        stop.set()
        for task in background:
            task.cancel()
        for task in background:
            with contextlib.suppress(BaseException):
                await task
        cluster.kill_all()
        await observer.close()
        with contextlib.suppress(Exception):
            await observer.forget_redis()
        drop_database(database)
        await delete_topics_containing(ns)
    figures.seconds = time.monotonic() - started
    figures.timeline = timeline.lines
    return figures
