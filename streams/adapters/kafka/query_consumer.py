"""The query consumer: ``memory.queries`` read by a plain aiokafka consumer in a
consumer group of its own (``{app_id}-query``), inside the worker process.

Answering is stateless, so it needs none of Faust's machinery, and it must not
wait for it: in Faust's group every membership change revokes every partition
and recovers tables, and a killed member holds the group for Faust's session
timeout. This group has a short session timeout of its own, optional static
membership, and rebalances that only drain a few requests.

Delivery rules:

* up to ``concurrency`` requests in flight, and up to ``read_ahead`` more read
  and queued per tenant (:mod:`streams.adapters.kafka.tenant_queues`; the tenant
  of the record key ``tenant/user``; with ``read_ahead_bytes``, bounded in bytes
  as well): the loop fetches only as many records as
  that leaves room for (requests in flight, queued and being refused counted),
  and none between a revocation and the next assignment;
* records are fetched from the partitions in turn
  (:mod:`streams.adapters.kafka.fetch_turns`), so a backlog (a partition just taken over
  from a killed worker) does not hold up the fresh requests of the others;
* a free slot goes to the tenants' queues in turn, a tenant holding at most half
  the slots while another tenant waits, and never the last free slot while none
  does (:mod:`streams.query.rules.fair_dispatch`): one tenant's backlog on a
  shared partition does not hold up another tenant's requests; while ``busy`` (how
  busy the event loop was lately) says so and another tenant asked lately, a tenant
  holds at most ``contended_slots``;
* a request whose tenant's queue holds its share of the read-ahead (in records,
  or bytes) is refused at
  once, without the engine (``shed``: an ``over_quota`` reply), in a task of its
  own outside the slots — answered and committed like any other request;
* a request holds its slot until its reply is out: what the answer still has to
  finish after that (its record's durable write, grouped with others') is waited
  for outside the slots — up to ``settling_max`` requests at once before they take
  room from the fetch — and the request is done, and committable, only once that
  is finished too;
* every record read is taken (``CommitPositions.begin``) at once, queued or not:
  offsets are committed per partition up to the first request not answered yet
  — queued, refusing or in flight
  (:class:`~streams.adapters.kafka.commit_positions.CommitPositions`), right after answers
  complete — one commit at a time, covering whatever completed meanwhile;
* on revocation (a graceful rebalance or shutdown) the queued requests of the
  partitions let go are dropped, neither answered nor committed; those in flight
  get ``drain_timeout_s`` to be answered, the rest are cancelled and left
  uncommitted, then what was answered is committed: the next owner starts
  exactly after the last answered request, and reads the dropped ones again.
  A queued request is not begun, so another worker's rescue
  (:mod:`streams.query.rescue`) may take it over; when it starts here it finds
  the reply sent.

With ``read_ahead`` 0, or no ``shed`` given to :meth:`QueryConsumer.start`, nothing is
read ahead: only as many records as there are free slots, each started at once.

The consumer is also the lag probe of the query stage (``streams/worker/kafka_monitor.py``)
and feeds its :class:`~streams.adapters.kafka.progress.ProgressTracker`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiokafka import ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError

from streams.adapters.kafka.commit_positions import CommitPositions
from streams.adapters.kafka.fetch_turns import POLL_MS, TurnFetch
from streams.adapters.kafka.progress import (
    ProgressTracker,
    publish_progress,
    publish_started,
)
from streams.adapters.kafka.query_consumer_config import (
    QueryConsumerConfig,
    from_consumer_record,
    kafka_consumer,
)
from streams.adapters.kafka.tenant_queues import TenantQueues, tp_of
from streams.metrics import QUERY_ABANDONED, QUERY_REBALANCES
from streams.query.ports import Settling
from streams.query.rules.fair_dispatch import tenant_of
from streams.wire.envelope import SourceRecord, TPKey

log = logging.getLogger(__name__)

STAGE = "query"
RETRY_S = 1.0

Answerer = Callable[[SourceRecord], Awaitable[Settling]]
"""Answers one request: back once its reply is out, with what must still finish before
the request counts as answered (None: nothing)."""


# aiokafka is untyped: its listener base class is Any to mypy
class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, owner: QueryConsumer) -> None:
        self.owner = owner

    async def on_partitions_revoked(self, revoked: Iterable[Any]) -> None:
        await self.owner._revoked(revoked)

    async def on_partitions_assigned(self, assigned: Iterable[Any]) -> None:
        await self.owner._assigned(assigned)


class QueryConsumer:
    def __init__(self, config: QueryConsumerConfig, *,
                 connect: Callable[[QueryConsumerConfig], Any] = kafka_consumer,
                 busy: Callable[[], bool] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.clock = clock
        self._busy = busy
        self.tracker = ProgressTracker(started_at=clock(), stage_of={config.topic: STAGE})
        self.positions = CommitPositions()
        self._connect = connect
        self._consumer: Any = None
        self._answer: Answerer | None = None
        self._shed: Answerer | None = None
        self._tasks: dict[asyncio.Task[None], TPKey] = {}  # each request's partition
        # a refusal (shed) holds no slot
        self._holding: dict[asyncio.Task[None], str] = {}  # slot holders: tenant
        self._running: dict[str, int] = {}  # slots held, by tenant
        self._settling = 0  # tasks whose reply is out, their answer not finished yet
        self._queues = TenantQueues(0, config.concurrency)
        self._turns = TurnFetch(self._begin)
        self._baseline: dict[TPKey, int | None] = {}
        self._backlog_end: dict[TPKey, int] = {}  # end offsets when assigned
        self._wake = asyncio.Event()
        self._dirty = asyncio.Event()
        self._commit_lock = asyncio.Lock()
        self._assigned_once = asyncio.Event()
        self._rebalancing = False  # partitions revoked, the new ones not assigned yet
        self._revoked_at: float | None = None  # monotonic: a held assignment's revocation
        self._stopping = False
        self._loop_task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ lifecycle
    def start(self, answer: Answerer, shed: Answerer | None = None) -> None:
        """Consume in the background until :meth:`stop`; ``answer`` (a request in a slot)
        and ``shed`` (a request refused at once, its tenant's queue full: with none,
        nothing is read ahead) never raise."""
        if self._loop_task is None:
            self._answer = answer
            self._shed = shed
            read_ahead = self.config.read_ahead if shed is not None else 0
            self._queues = TenantQueues(read_ahead, self.config.concurrency,
                                        self.config.read_ahead_bytes,
                                        contended_slots=self.config.contended_slots,
                                        busy=self._busy)
            self._loop_task = asyncio.get_running_loop().create_task(self._run())

    async def wait_assigned(self, timeout_s: float) -> bool:
        """Wait for the first partition assignment; False when it took longer."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._assigned_once.wait(), timeout_s)
        return self._assigned_once.is_set()

    async def stop(self) -> None:
        """Stop fetching, drain and commit, leave the group (idempotent)."""
        self._stopping = True
        self._wake.set()
        if self._loop_task is not None:
            await asyncio.gather(self._loop_task, return_exceptions=True)

    async def _run(self) -> None:
        consumer = await self._start_consumer()
        if consumer is None:
            return
        publish_started(self.tracker)
        committer = asyncio.get_running_loop().create_task(self._commit_loop())
        try:
            while not self._stopping:
                await self._fetch(consumer)
        finally:
            self._queues.drop()  # not begun: the next owner reads them again
            await self._drain(set(self._tasks.values()))
            await self._commit()
            committer.cancel()
            await asyncio.gather(committer, return_exceptions=True)
            await consumer.stop()  # leaves the group (not with an instance id)
            self._consumer = None
            log.info("query consumer stopped")

    async def _start_consumer(self) -> Any:
        while not self._stopping:
            consumer = self._connect(self.config)
            try:
                await consumer.start()
                consumer.subscribe([self.config.topic], listener=_Rebalance(self))
            except KafkaError as exc:
                log.warning("query consumer cannot start, retrying: %s: %s",
                            type(exc).__name__, exc)
                await consumer.stop()
                await asyncio.sleep(RETRY_S)
                continue
            self._consumer = consumer
            return consumer
        return None

    # ---------------------------------------------------------------- fetch
    async def _fetch(self, consumer: Any) -> None:
        settled_aside = min(self._settling, self.config.settling_max)
        room = (self.config.concurrency + self._queues.read_ahead
                - len(self._tasks) + settled_aside - len(self._queues))
        if room <= 0 or self._rebalancing:  # rebalancing: nothing is this worker's
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), POLL_MS / 1000)
            if not self._rebalancing:
                self._dispatch()  # the slots' sharing may have changed (the loop idle now)
            return
        try:
            await self._turns.fill(consumer, room)
        except Exception as exc:  # the loop must go on: its end would stop all queries
            log.warning("query fetch failed: %s: %s", type(exc).__name__, exc)
            await asyncio.sleep(RETRY_S)
        self._dispatch()

    def _begin(self, r: Any) -> None:
        """Take a fetched record: in flight at once (no read-ahead), queued under its
        tenant, or refused at once (its tenant's queue is full)."""
        assert self._answer is not None
        self.positions.begin(tp_of(r), r.offset)
        if not self._queues.read_ahead:
            self._start(r, tenant_of(r.key), self._answer)
        elif not self._queues.push(r, may_shed=not self._in_backlog(r)):
            assert self._shed is not None
            self._start(r, None, self._shed)

    def _dispatch(self) -> None:
        """Start queued requests while a slot is free for one (tenants in turn)."""
        assert self._answer is not None
        while not self._stopping and (picked := self._queues.next(self._running)):
            tenant, r = picked
            self._start(r, tenant, self._answer)

    def _start(self, r: Any, tenant: str | None, answer: Answerer) -> None:
        tp = tp_of(r)
        task = asyncio.get_running_loop().create_task(self._one(tp, r, answer))
        self._tasks[task] = tp
        if tenant is not None:
            self._holding[task] = tenant
            self._running[tenant] = self._running.get(tenant, 0) + 1
        task.add_done_callback(self._done)

    async def _one(self, tp: TPKey, r: Any, answer: Answerer) -> None:
        try:
            settling = await answer(from_consumer_record(r))
            if settling is not None:
                self._settling += 1
                try:
                    if (task := asyncio.current_task()) is not None:
                        self._release(task)  # its reply is out
                    await settling
                finally:
                    self._settling -= 1
        except asyncio.CancelledError:
            raise  # abandoned: neither finished nor committed
        except Exception:
            log.exception("query request %s[%d]@%d failed", tp[0], tp[1], r.offset)
        self.positions.finish(tp, r.offset)
        self._dirty.set()

    def _release(self, task: asyncio.Task[Any]) -> None:
        """The slot ``task`` holds (if any) goes to the next request queued."""
        tenant = self._holding.pop(task, None)
        if tenant is None:
            return
        held = self._running.get(tenant, 0) - 1
        if held > 0:
            self._running[tenant] = held
        else:
            self._running.pop(tenant, None)
        if self._answer is not None and self._queues:
            self._dispatch()
        self._wake.set()

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.pop(task, None)
        self._release(task)
        self._wake.set()

    # --------------------------------------------------------------- commit
    async def _commit_loop(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            if not await self._commit():
                await asyncio.sleep(RETRY_S)
                self._dirty.set()

    async def _commit(self, tps: Iterable[TPKey] | None = None) -> bool:
        """Commit the answered positions (of ``tps``, or all); False when it failed."""
        async with self._commit_lock:
            offsets = self.positions.committable(tps)
            if not offsets or self._consumer is None:
                return True
            try:
                # aiokafka retries while the coordinator is unknown: bounded here, so
                # that a rebalance or a shutdown during a Kafka outage still ends
                await asyncio.wait_for(self._consumer.commit(
                    {TopicPartition(t, p): o for (t, p), o in offsets.items()}),
                    self.config.session_timeout_s)
            except (KafkaError, TimeoutError) as exc:
                log.info("query offsets not committed yet: %s: %s", type(exc).__name__, exc)
                return False
            self.positions.committed(offsets)
            publish_progress(self.tracker.on_commit(offsets, self.clock()))
            return True

    # ------------------------------------------------------------ rebalance
    async def _drain(self, tps: set[TPKey]) -> None:
        tasks = [t for t, tp in self._tasks.items() if tp in tps]
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=self.config.drain_timeout_s)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
            # a request whose reply was already on its way may still end answered
            let_go = sum(1 for task in pending if task.cancelled())
            if let_go:
                QUERY_ABANDONED.inc(let_go)
                log.warning("%d query requests not answered within %.1fs were let go "
                            "uncommitted", let_go, self.config.drain_timeout_s)

    async def _revoked(self, revoked: Iterable[Any]) -> None:
        self._rebalancing = True
        if self._assigned_once.is_set():  # not the call before the first join
            self._revoked_at = time.monotonic()
        QUERY_REBALANCES.inc()
        self.tracker.on_rebalance_start(self.clock())
        tps = {(tp.topic, int(tp.partition)) for tp in revoked}
        if dropped := self._queues.drop(tps):  # not begun: the next owner reads them
            log.info("%d queued query requests let go uncommitted", dropped)
        await self._drain(tps)
        await self._commit(tps)
        self.positions.forget(tps)
        self.tracker.forget(tps)
        for tp in tps:
            self._baseline.pop(tp, None)
            self._backlog_end.pop(tp, None)

    async def _assigned(self, assigned: Iterable[Any]) -> None:
        try:
            await self._take(list(assigned))
        finally:  # whatever happened, the partitions are this worker's again
            self._rebalancing = False
            self._revoked_at = None

    async def _take(self, tps: list[Any]) -> None:
        consumer = self._consumer
        if consumer is not None and tps:
            try:
                found = await asyncio.gather(*(consumer.committed(tp) for tp in tps))
            except KafkaError as exc:  # lag stays unknown until the first commit
                log.info("committed query offsets unknown: %s", exc)
            else:
                for tp, offset in zip(tps, found, strict=True):
                    self._baseline[(tp.topic, int(tp.partition))] = offset
            try:  # what was produced before this assignment may have been answered before
                ends = await consumer.end_offsets(tps)
            except KafkaError as exc:  # unknown: every request may have been
                log.info("end offsets of the query partitions unknown: %s", exc)
            else:
                for tp, end in ends.items():
                    if end is not None:
                        self._backlog_end[(tp.topic, int(tp.partition))] = int(end)
        self.tracker.on_rebalance_end(self.clock())
        self._assigned_once.set()
        log.info("query partitions assigned: %s",
                 ", ".join(str(p) for p in sorted(int(tp.partition) for tp in tps)) or "none")

    def _in_backlog(self, r: Any) -> bool:
        """The record was in its partition's backlog when the partition was assigned."""
        end = self._backlog_end.get(tp_of(r))
        return end is not None and r.offset < end

    def maybe_seen(self, rec: SourceRecord) -> bool:
        """Whether another member may have delivered this request before: it was
        in its partition's backlog when the partition was assigned here (or that
        backlog is unknown). A request produced since then is new to the group."""
        end = self._backlog_end.get((rec.topic, rec.partition))
        return end is None or rec.offset < end

    # ------------------------------------------------ probe (health, metrics)
    def queued(self) -> int:
        """Requests read ahead and not started yet."""
        return len(self._queues)

    def started(self) -> bool:
        return self._consumer is not None and not self._stopping

    def _assignment(self) -> set[Any]:
        if self._consumer is None:
            return set()
        try:
            return set(self._consumer.assignment())
        except Exception:
            return set()

    def rebalancing(self, now: float | None = None) -> bool:
        """The group stopped reading: the partitions this worker held were revoked at
        least a heartbeat ago (every member has heard of the rebalance by then: in an
        eager one none reads), new ones not assigned yet, and not longer ago than a
        rebalance may last (session timeout and drain). Never before the first
        assignment: a member that cannot join says nothing of the others."""
        if not self._rebalancing or self._revoked_at is None:
            return False
        since = (time.monotonic() if now is None else now) - self._revoked_at
        c = self.config
        return c.heartbeat_interval_s <= since <= c.session_timeout_s + c.drain_timeout_s

    def partitions(self) -> list[int]:
        """The partitions whose requests this worker answers now: none while the group
        rebalances (their fetching stopped when they were revoked)."""
        if self._rebalancing:
            return []
        return sorted(int(tp.partition) for tp in self._assignment())

    def assigned(self) -> set[Any]:
        """Owned partitions whose committed offset is known (their lag is)."""
        return {tp for tp in self._assignment() if (tp.topic, int(tp.partition)) in
                self._baseline or self.positions.committed_offset(
                    (tp.topic, int(tp.partition))) is not None}

    def highwater(self, tp: Any) -> int | None:
        try:
            value = self._consumer.highwater(tp)
        except Exception:
            return None
        return int(value) if value is not None else None

    def committed(self, tp: Any) -> int | None:
        key = (tp.topic, int(tp.partition))
        own = self.positions.committed_offset(key)
        return own if own is not None else self._baseline.get(key)

    async def end_offsets(self, tps: list[Any]) -> tuple[dict[Any, int], dict[Any, int]]:
        ends = await self._consumer.end_offsets(tps)
        starts = await self._consumer.beginning_offsets(tps)
        return ({tp: int(o) for tp, o in ends.items() if o is not None},
                {tp: int(o) for tp, o in starts.items() if o is not None})
