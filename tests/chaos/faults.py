"""The disturbed phase's workers and private services, and the faults done to them.

A :class:`Cluster` holds worker *slots* (each its own data directory, a new
process and log on every start) beside a private Redis and MariaDB. The
:class:`FaultDriver` runs a :mod:`.schedule`: each fault when its share of
the workload has been published, one after the other; killed workers come back
after their pause while the next faults go on.

The SIGKILL in the middle of a consolidation is aimed from the outside: the
workers' ``memstream_consolidations_in_flight`` gauge is polled until exactly
one of them is consolidating while the database holds a run that is not
``done`` and was touched within the last second — that worker's run — and that
worker is killed at once. The kill counts as aimed when the run is still not
done a moment later (survivors finish theirs within milliseconds, and nobody
has taken over the dead worker's partitions yet); otherwise it aims again.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from tests.chaos.observe import Observer
from tests.chaos.schedule import Fault
from tests.chaos.traffic import Timeline
from tests.integration.conftest import Stack
from tests.support.services import KAFKA_BOOTSTRAP, PrivateMariaDB, PrivateRedis
from tests.support.worker import WorkerProcess

IN_FLIGHT = "memstream_consolidations_in_flight"
AIM_TIMEOUT_S = 60.0
AIM_ATTEMPTS = 3
RECENT_S = 1.0  # a run touched this recently is being worked on
CONFIRM_AFTER_S = 1.5
READY_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0  # SIGTERM, then SIGKILL (the timeline shows exit code -9)
SETTLE_S = 5.0  # a worker this long ready has caught up on what it missed
MOVE_STAY_S = 20.0  # longer than a closed conversation's retention (phases.WORKER_ENV)


@dataclass
class Slot:
    name: str
    data_dir: Path
    process: WorkerProcess | None = None
    ready: bool = False  # its process reported "Worker ready"
    retired: bool = False
    ready_at: float = 0.0  # the event loop's time when it did

    @property
    def alive(self) -> bool:
        """Ready and running: faults hit only workers that finished starting."""
        return (not self.retired and self.ready and self.process is not None
                and self.process.alive)

    @property
    def port(self) -> int:
        assert self.process is not None
        return int(self.process.env["MEMSTREAM_WEB__PORT"])


TOPIC_SETTING = 1  # DescribeConfigs source: set on the topic itself
COMPACTION = {"segment.ms": "2000", "min.cleanable.dirty.ratio": "0.01",
              "delete.retention.ms": "2000", "min.compaction.lag.ms": "0"}


async def compact_quickly(topic: str) -> None:
    """Have the broker compact ``topic`` within seconds: short segments and tombstone
    retention on the topic (its other settings kept: the request replaces them all),
    and the log cleaner looking every second (a cluster-wide setting of the test
    broker)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=KAFKA_BOOTSTRAP)
    await admin.start()
    try:
        (described,) = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic)])
        entries = described.resources[0][4]  # (name, value, read only, source, ...)
        kept = {e[0]: e[1] for e in entries if e[3] == TOPIC_SETTING}
        brokers = (await admin.describe_cluster())["brokers"]
        await admin.alter_configs([
            ConfigResource(ConfigResourceType.TOPIC, topic, {**kept, **COMPACTION}),
            *(ConfigResource(ConfigResourceType.BROKER, str(b["node_id"]),
                             {"log.cleaner.backoff.ms": "1000"}) for b in brokers)])
    finally:
        await admin.close()


class Cluster:
    def __init__(self, stack: Stack, timeline: Timeline, *, redis: PrivateRedis | None = None,
                 mariadb: PrivateMariaDB | None = None) -> None:
        self.stack = stack
        self.timeline = timeline
        self.redis = redis
        self.mariadb = mariadb
        self.slots: list[Slot] = []
        self.outages: list[tuple[float, float]] = []
        self.rebalances: list[tuple[float, float]] = []

    async def start(self, slot: Slot | None = None, *, must: bool = False) -> Slot:
        """Start ``slot`` again, or a new one; returns when the worker is ready, or
        gave up (noted; raised when ``must``): a worker that cannot start is a
        finding of the run, not the end of it."""
        if slot is None:
            n = len(self.slots)
            slot = Slot(f"w{n}", self.stack.tmp / f"data-w{n}")
            self.slots.append(slot)
        process = self.stack.worker(MEMSTREAM_KAFKA__DATA_DIR=str(slot.data_dir))
        slot.process, slot.ready = process, False
        process.start(wait_ready=False)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + READY_TIMEOUT_S
        while "Worker ready" not in process.log_text():
            problem = ("exited" if not process.alive
                       else "not ready" if loop.time() > deadline else None)
            if problem is not None:
                self.timeline.note(f"{slot.name} {problem} ({process.log_path.name})")
                if must:
                    raise RuntimeError(f"{slot.name} {problem}:\n{process.log_text()[-3000:]}")
                return slot
            await asyncio.sleep(0.2)
        slot.ready, slot.ready_at = True, loop.time()
        self.timeline.note(f"{slot.name} ready (port {slot.port}, {process.log_path.name})")
        return slot

    def live(self) -> list[Slot]:
        return [s for s in self.slots if s.alive]

    async def answering(self, client: httpx.AsyncClient, slot: Slot) -> bool:
        """The slot's worker holds query partitions (its readiness says which)."""
        if slot.retired or slot.process is None or not slot.process.alive:
            return False
        try:
            r = await client.get(f"http://127.0.0.1:{slot.port}/health/ready")
            return r.status_code == 200 and bool(r.json()["query"]["partitions"])
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            return False

    async def watch_outages(self, every_s: float = 0.1) -> None:
        """Note in ``outages`` each span (monotonic start, end) from the moment no worker
        is live to the moment one holds query partitions again — nobody could answer —
        and in ``rebalances`` each span in which workers were live but none held query
        partitions (the query group rebalancing), until cancelled (an open span ends
        then)."""
        outage: float | None = None
        rebalance: float | None = None
        try:
            async with httpx.AsyncClient(timeout=0.5) as client:
                while True:
                    held = any(await asyncio.gather(*(self.answering(client, s)
                                                      for s in list(self.slots))))
                    now = time.monotonic()
                    if outage is None and not self.live():
                        outage = now
                        if rebalance is not None:
                            self.rebalances.append((rebalance, now))
                            rebalance = None
                    elif outage is None and rebalance is None and not held:
                        rebalance = now
                    if held and outage is not None:
                        self.outages.append((outage, now))
                        outage = None
                    if held and rebalance is not None:
                        self.rebalances.append((rebalance, now))
                        rebalance = None
                    await asyncio.sleep(every_s)
        finally:
            if outage is not None:
                self.outages.append((outage, time.monotonic()))
            if rebalance is not None:
                self.rebalances.append((rebalance, time.monotonic()))

    async def in_flight(self, client: httpx.AsyncClient, slot: Slot) -> float:
        try:
            text = (await client.get(f"http://127.0.0.1:{slot.port}/metrics")).text
        except httpx.HTTPError:
            return 0.0
        for line in text.splitlines():
            if line.startswith(IN_FLIGHT + " "):
                return float(line.split()[1])
        return 0.0

    def kill_all(self) -> None:
        """The end of a phase (its snapshot taken): nothing to wait for."""
        for s in self.slots:
            if s.process is not None:
                s.process.kill()


class FaultDriver:
    def __init__(self, cluster: Cluster, schedule: list[Fault], observer: Observer, *,
                 stay_s: float = 0.0) -> None:
        """``stay_s``: how long the added worker holds partitions before it is stopped
        (``MOVE_STAY_S``: longer than a closed state's retention and the changelog's
        compaction, so partitions come back after their states expired)."""
        self.stay_s = stay_s
        self.cluster = cluster
        self.schedule = schedule
        self.observer = observer
        self.kills = 0
        self.aimed: list[str] = []  # unfinished runs the aimed kill left behind
        self.skipped: list[str] = []  # faults that could not be done
        self._background: list[asyncio.Task[object]] = []
        self.moved_back = asyncio.Event()  # the added worker left (or none was added)
        self._added: asyncio.Future[Slot] | None = None
        if not any(f.kind == "add_worker" for f in schedule):
            self.moved_back.set()

    def note(self, what: str) -> None:
        self.cluster.timeline.note(what)

    async def run(self) -> None:
        for fault in self.schedule:
            await self.cluster.timeline.reached(fault.at)
            try:
                await getattr(self, f"_{fault.kind}")(fault)
            except Exception as exc:  # e.g. no live worker to hit: say so, go on
                self.skipped.append(fault.kind)
                self.note(f"{fault.kind} not done: {type(exc).__name__}: {exc}")
        await asyncio.gather(*self._background)

    def _later(self, what: Coroutine[Any, Any, object]) -> None:
        self._background.append(asyncio.create_task(what))

    async def _restart_after(self, slot: Slot, pause_s: float) -> None:
        await asyncio.sleep(pause_s)
        await self.cluster.start(slot)

    async def _victim(self, fault: Fault) -> Slot:
        live = await self._wait_live(1)
        return live[fault.pick % len(live)]

    async def _wait_live(self, n: int, timeout_s: float = 120.0) -> list[Slot]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while len(live := self.cluster.live()) < n:
            if loop.time() > deadline:
                raise TimeoutError(f"fewer than {n} live workers for {timeout_s:.0f}s")
            await asyncio.sleep(0.2)
        return live

    def _sigkill(self, slot: Slot, fault: Fault, why: str) -> None:
        assert slot.process is not None
        slot.process.kill()
        self.kills += 1
        self.note(f"SIGKILL {slot.name} ({why}); back in {fault.pause_s:.1f}s")
        self._later(self._restart_after(slot, fault.pause_s))

    async def _kill(self, fault: Fault) -> None:
        self._sigkill(await self._victim(fault), fault, "scheduled")

    async def _kill_consolidating(self, fault: Fault) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + AIM_TIMEOUT_S
        attempts = 0
        async with httpx.AsyncClient(timeout=0.5) as client:
            while loop.time() < deadline and attempts < AIM_ATTEMPTS:
                live = await self._wait_live(1)
                counts = await asyncio.gather(*(self.cluster.in_flight(client, s) for s in live))
                busy = [s for s, n in zip(live, counts, strict=True) if n > 0]
                # one worker consolidating, and a run it touched a moment ago not done:
                # that run is the one this kill interrupts
                if len(busy) == 1 and (runs := await self._open_runs(RECENT_S)):
                    attempts += 1
                    self._sigkill(busy[0], fault, f"consolidating; open: {', '.join(runs)}")
                    if await self._confirm(runs):
                        return
                    continue
                await asyncio.sleep(0.02)
        if not attempts:
            self.note(f"no lone consolidation seen for {AIM_TIMEOUT_S:.0f}s: a plain kill")
            await self._kill(fault)

    async def _open_runs(self, touched_within_s: float | None = None) -> set[str]:
        try:
            return await self.observer.unfinished_runs(touched_within_s)
        except Exception as exc:  # unreadable now: aim again
            self.note(f"runs unreadable: {type(exc).__name__}: {exc}")
            return set()

    async def _confirm(self, runs: set[str]) -> bool:
        """Whether runs open at the kill stay open: nobody finished them."""
        await asyncio.sleep(CONFIRM_AFTER_S)
        left = sorted(runs & await self._open_runs())
        if left:
            self.aimed = left
            self.note(f"left unfinished by the kill: {', '.join(left)}")
        else:
            self.note("the runs finished before the kill landed: aiming again")
        return bool(left)

    async def _none_starting(self) -> None:
        # not while another worker is starting: on the test's two cores two starting
        # workers starve the live one for seconds (a deployment gives each pod its own
        # CPU); a restart and an addition at once would measure the machine. A worker
        # ready a moment ago is still catching up (the records it missed, cold caches):
        # SETTLE_S after it
        loop = asyncio.get_running_loop()
        for _ in range(600):  # 120 s at most
            if all(s.retired or (s.alive and loop.time() - s.ready_at >= SETTLE_S)
                   for s in self.cluster.slots) and (
                    self._added is None or self._added.done()):  # the added one too
                return
            await asyncio.sleep(0.2)
        self.note("a worker still starting or settling after 120s: the fault goes on")

    async def _add_worker(self, fault: Fault) -> None:
        await self._none_starting()
        self.note("adding a worker: partitions move away from the live ones")
        self._added = asyncio.ensure_future(self.cluster.start())
        self._background.append(self._added)  # type: ignore[arg-type]

    async def _stop_worker(self, fault: Fault) -> None:
        if self.stay_s > 0:
            self._later(self._stop(fault))  # the next faults go on meanwhile
        else:
            await self._stop(fault)

    async def _stop(self, fault: Fault) -> None:
        """SIGTERM a live worker of two or more; with ``stay_s`` and a worker added
        before, that worker once it held partitions that long — longer than a closed
        conversation's retention in the sessions table and the changelog's
        compaction — so they come back to the workers that held them after their
        states expired (the returning conversations wait for it, ``moved_back``)."""
        try:
            if self._added is not None and self.stay_s > 0:
                slot = await self._added
                await asyncio.sleep(self.stay_s)
                if not slot.alive:
                    slot = (await self._wait_live(2))[fault.pick % 2]
            else:  # not while one is starting: it would leave the live one alone beside it
                await self._none_starting()
                live = await self._wait_live(2)
                slot = live[fault.pick % len(live)]
            slot.retired = True
            self.note(f"SIGTERM {slot.name} (it stays stopped): its partitions come back")
            assert slot.process is not None
            await asyncio.to_thread(slot.process.stop, STOP_TIMEOUT_S)
            code = slot.process.proc.returncode if slot.process.proc else None
            self.note(f"{slot.name} stopped (exit code {code})")
        finally:
            self.moved_back.set()

    async def _restart_redis(self, fault: Fault) -> None:
        assert self.cluster.redis is not None
        self.note("Redis stopped")
        await asyncio.to_thread(self.cluster.redis.stop)
        await asyncio.sleep(fault.pause_s)
        await asyncio.to_thread(self.cluster.redis.start)
        self.note("Redis back (empty)")

    async def _restart_mariadb(self, fault: Fault) -> None:
        assert self.cluster.mariadb is not None
        self.note("MariaDB stopping")
        await asyncio.to_thread(self.cluster.mariadb.stop)
        self.note("MariaDB stopped")
        await asyncio.sleep(fault.pause_s)
        await asyncio.to_thread(self.cluster.mariadb.start)
        self.note("MariaDB back")

    async def cancel(self) -> None:
        for t in self._background:
            t.cancel()
        for t in self._background:
            with contextlib.suppress(BaseException):
                await t
