"""The few places memstream touches Faust internals, kept in one module (and
:mod:`.faust_wait_empty`).

* ``event_context``: Faust routes a table write to the partition of the
  *current event*, a context variable its stream iterator sets. Inside a batch
  from ``noack_take`` that variable belongs to the background task filling
  the buffer, so each write sets it to the event the write belongs to.
* ``source_record``: a Faust event as a library-neutral :class:`SourceRecord`.
* ``timer``: ``app.timer`` with a type (Faust's decorator has none).
* ``resume_clears_only_a_suspended_flow``: Faust's flow control empties every
  stream's queue each time it is resumed (``FlowControlEvent.resume`` in
  ``mode/utils/queues.py``), also when it was running already. After a rebalance
  with tables to recover it is: recovery resumed it to read the changelogs, and
  ``Recovery._resume_streams`` then resumes the stream partitions, seeks them to
  their committed offsets (a request to the broker per partition) and resumes the
  flow once more. A record fetched meanwhile after its partition's seek was
  dropped from its stream's queue by that last resume, and never fetched again:
  the partition's records stopped there until the next rebalance (a session end
  read by a restarted worker was not consolidated). The flow control now empties
  the queues only when a suspended flow resumes — what was queued before the
  rebalance — never what was delivered while it runs. A record delivered before
  its partition's seek is then delivered again after it, as it already was when
  its agent had taken it before that resume: at worst handled twice, which the
  commit guard and every sink tolerate.
* ``seek_uncommitted_to_start``: after a rebalance Faust seeks every stream
  partition back to its committed offset, through aiokafka's
  ``seek_to_committed``, which seeks only when the offset is above 0. Records
  fetched meanwhile (during table recovery, when Faust silently drops what it
  fetched for partitions it has not resumed) are then never delivered on a
  partition whose committed offset is 0 (a group rewound to the start) or
  absent (nothing committed yet): a backlog there waits for the next restart.
  The patch seeks such partitions to their start (the app resets to
  ``earliest``); at worst a record is processed twice, which every sink
  tolerates.
* ``partitioned_table``: a table whose worker forgets a partition it lost.
  Faust's in-memory store knows the partition only of the keys it recovered
  from the changelog, and forgets only those (``on_recovery_completed`` in
  ``faust/stores/memory.py``): a key this worker wrote stays in its store after
  its partition is revoked. Should the key be deleted elsewhere meanwhile and
  its tombstone compacted away, the partition coming back brings the stale
  value back with it — the changelog no longer says otherwise. The table
  remembers the partition of every key it writes, and at every rebalance drops
  each key of the partitions revoked from this worker. A write checks, as Faust's
  does, that the source topic and the changelog have as many partitions, but only
  once the group's metadata knows both: a changelog just created (a worker's first
  start on a cluster) reads 0 partitions there for a moment, which is no mismatch
  (Faust's check failed the write, and with it the ingest writer). The changelog
  is then being created by Faust with ``kafka.partitions``, which the source
  topics were checked against at start (``ensure_topics``); the changelog record
  goes to the event's partition through the producer's own metadata. A changelog
  the metadata knows with another count (4 against 2) still fails the write.
* ``topic_global_table``: a global table over an existing topic. Faust's
  assignor looks a global table's changelog up by its *default* name
  (``{app_id}-{table}-changelog``), not by the ``changelog_topic`` given, and
  fails the assignment with a ``KeyError``; the subclass answers with the
  topic's real name.
* ``install_commit_guard``: Faust commits from its own acknowledgement
  bookkeeping, which counts a jump in delivered offsets as acknowledged. The
  guard (:mod:`streams.worker.commit_guard`) sees every record the Kafka client hands
  to Faust and every record memstream finished, and each commit is lowered to
  what it allows. A partition on which a record was passed over (a later one
  finished, it did not) is delivered again: after ``recover_after_s`` the
  worker asks the group to rebalance, and the new assignment starts from the
  guarded commit; a record delivered after one passed over is not admitted
  (:func:`admit`) and has the partition delivered again within a second or
  two. Agents acknowledge through ``worker.acknowledge`` (``streams/worker/context.py``).
* Faust's wait for the records handed to agents, at a rebalance or a stop,
  runs a full garbage collection on every turn: :mod:`.faust_wait_empty`
  replaces it.
* ``QuietWorker``: at log levels warn and above, Faust's worker spins a
  terminal spinner on every log record and, to feed it, sets the root logger to
  DEBUG: every debug line of Faust and aiokafka then builds a record (about a
  tenth of the ingest worker's time). This worker has no spinner.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypedDict, cast

import faust
from faust.streams import _current_event, current_event
from faust.tables.globaltable import GlobalTable
from faust.transport.consumer import Consumer
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread
from faust.types import TP
from faust.types.tuples import ack_lock
from mode.utils.queues import FlowControlEvent

from streams.metrics import COMMIT_REFUSED, GROUP_REJOINS
from streams.redaction import redact_logs
from streams.session.ports import SessionTable
from streams.settings import KafkaSettings
from streams.wire.envelope import SourceRecord
from streams.wire.headers import Headers
from streams.worker.commit_guard import CommitGuard

log = logging.getLogger(__name__)


@contextmanager
def event_context(event: Any) -> Iterator[None]:
    token = _current_event.set(weakref.ref(event))
    try:
        yield
    finally:
        _current_event.reset(token)


class _PartitionedTable(faust.Table[Any, Any]):
    """See ``partitioned_table``; the store is Faust's in-memory one."""

    def _partitions(self) -> dict[Any, int]:
        return cast(dict[Any, int], cast(Any, self.data)._key_partition)

    def on_key_set(self, key: Any, value: Any) -> None:
        super().on_key_set(key, value)
        event = current_event()
        assert event is not None  # Faust's own on_key_set raised otherwise
        self._partitions()[key] = event.message.partition

    def on_key_del(self, key: Any) -> None:
        super().on_key_del(key)
        self._partitions().pop(key, None)

    def _verify_source_topic_partitions(self, source_topic: str) -> None:
        consumer = self.app.consumer
        counts = (consumer.topic_partitions(source_topic),
                  consumer.topic_partitions(self._changelog_topic_name()))
        if 0 in counts:  # a topic just created, not yet in the group's metadata
            return  # checked at a later write
        super()._verify_source_topic_partitions(source_topic)

    async def on_rebalance(self, assigned: set[TP], revoked: set[TP],
                           newly_assigned: set[TP], generation_id: int = 0) -> None:
        await super().on_rebalance(assigned, revoked, newly_assigned, generation_id)
        changelog = self._changelog_topic_name()
        self.forget({tp.partition for tp in revoked if tp.topic == changelog})

    def forget(self, partitions: set[int]) -> int:
        """Drop every key of ``partitions`` from this worker's store (no changelog
        record: the partition's owner holds it); how many."""
        if not partitions:
            return 0
        by_key = self._partitions()
        gone = [k for k, p in by_key.items() if p in partitions]
        for k in gone:
            cast(Any, self.data).data.pop(k, None)
            del by_key[k]
        log.info("table %s: dropped %d keys of the revoked partitions %s", self.name,
                 len(gone), sorted(partitions))
        return len(gone)


def partitioned_table(app: Any, name: str, *, key_type: type, help: str) -> Any:
    """``app.Table(name)`` (no default, in-memory store) whose worker drops every
    key of a partition revoked from it, its own writes included (see the module
    docstring)."""
    return app.tables.add(_PartitionedTable(app, name=name, default=None,
                                            beacon=app.tables.beacon, key_type=key_type,
                                            help=help))


class _TopicGlobalTable(GlobalTable):
    def _changelog_topic_name(self) -> str:
        if self._changelog_topic is not None:
            return str(self._changelog_topic.get_topic_name())
        return str(super()._changelog_topic_name())


def topic_global_table(app: Any, name: str, *, topic: Any, help: str) -> Any:
    """A read-only global table holding ``topic`` (raw bytes keys and values),
    which other producers write to. Every worker reads all of it, and keeps
    reading after recovery (``synchronize_all_active_partitions``: no worker is
    the writer). One partition and a recovery buffer of one, as Faust advises
    for global tables shared by several workers."""
    return app.tables.add(_TopicGlobalTable(
        app, name=name, default=None, beacon=app.tables.beacon, partitions=1,
        standby_buffer_size=1, recovery_buffer_size=1, is_global=True,
        synchronize_all_active_partitions=True, changelog_topic=topic, key_type=bytes,
        value_type=bytes, help=help,
    ))


_original_perform_seek = Consumer.perform_seek


async def _perform_seek(self: Any) -> None:
    await _original_perform_seek(self)
    if str(self.app.conf.consumer_auto_offset_reset) != "earliest":
        return
    changelogs = set(self.app.tables.changelog_topics)
    for tp in self.assignment():
        if tp.topic not in changelogs and self._committed_offset.get(tp) is None:
            await self.seek(tp, 0)  # below the log start, the "earliest" reset applies


def committed_offsets(app: Any) -> Callable[[str, int], int | None]:
    """What the worker's consumer last committed for a topic partition (the next offset
    to read), None when nothing is known (not assigned, or nothing committed yet)."""
    def committed(topic: str, partition: int) -> int | None:
        consumer = getattr(app, "_consumer", None)  # None before the consumer exists
        if consumer is None:
            return None
        offset = consumer._committed_offset.get(TP(topic, partition))
        return None if offset is None else int(offset)
    return committed


def seek_uncommitted_to_start() -> None:
    """Install the seek fix described in the module docstring (idempotent)."""
    setattr(Consumer, "perform_seek", _perform_seek)  # noqa: B010  (a method on a class)


_original_flow_resume = FlowControlEvent.resume


def _flow_resume(self: FlowControlEvent) -> None:
    if self.is_active():
        return  # running: nothing is left from before a rebalance, nothing is dropped
    _original_flow_resume(self)


def resume_clears_only_a_suspended_flow() -> None:
    """Install the flow-control fix described in the module docstring (idempotent):
    ``resume()`` of a running flow changes nothing; of a suspended one, it empties the
    streams' queues and lets records in, as Faust's does."""
    setattr(FlowControlEvent, "resume", _flow_resume)  # noqa: B010  (a method on a class)


_original_fetch_records = AIOKafkaConsumerThread._fetch_records
_original_filter_committable = Consumer._filter_committable_offsets
_original_revoked = Consumer.on_partitions_revoked
_original_assigned = Consumer.on_partitions_assigned


def _keys(tps: Iterable[TP]) -> list[tuple[str, int]]:
    return [(tp.topic, tp.partition) for tp in tps]


class _Recovery:
    """Asks for a rebalance when a partition had a record passed over: at
    delivery (a hole: certain, after ``hole_after_s``) or seen in what was
    finished (after ``after_s``); at most one rebalance per ``after_s``."""

    def __init__(self, guard: CommitGuard, out_of_order: frozenset[str], after_s: float,
                 hole_after_s: float = 1.0) -> None:
        self.guard = guard
        self.out_of_order = out_of_order
        self.after_s = after_s
        self.hole_after_s = min(hole_after_s, after_s)
        self.since: dict[tuple[str, int], float] = {}
        self.last_rejoin = float("-inf")
        self._task: asyncio.Future[None] | None = None

    def check(self, consumer: Any) -> None:
        now = time.monotonic()
        holes = set(self.guard.holes())
        suspects = holes | {k for k in self.guard.all_skipped() if k[0] not in self.out_of_order}
        for k in list(self.since):
            if k not in suspects:
                del self.since[k]
        for k in suspects:
            self.since.setdefault(k, now)
        overdue = sorted(k for k, t in self.since.items()
                         if now - t >= (self.hole_after_s if k in holes else self.after_s))
        if overdue and now - self.last_rejoin >= self.after_s:
            self.last_rejoin = now
            log.error("records were passed over on %s; asking the group to rebalance so "
                      "they are delivered again from the guarded commit", overdue)
            GROUP_REJOINS.inc()
            self._task = asyncio.ensure_future(_request_rejoin(consumer))


async def _request_rejoin(consumer: Any) -> None:
    async def rejoin() -> None:
        consumer._thread._ensure_consumer()._coordinator.request_rejoin()

    try:
        await consumer._thread.call_thread(rejoin)
    except Exception as exc:  # the next check asks again
        log.warning("could not ask for a rebalance: %s: %s", type(exc).__name__, exc)


def install_commit_guard(guard: CommitGuard, *, out_of_order_topics: Iterable[str] = (),
                         recover_after_s: float = 10.0) -> None:
    """Wire ``guard`` into Faust's consumer (see the module docstring).

    ``out_of_order_topics``: topics whose records are finished out of order on
    purpose (:func:`out_of_order_topics`); an unfinished record below a finished
    one there is waiting or running, not passed over."""
    recovery = _Recovery(guard, frozenset(out_of_order_topics), recover_after_s)

    async def fetch_records(self: Any, consumer: Any, active_partitions: Any,
                            timeout: float | None = None,  # noqa: ASYNC109  (Faust's)
                            max_records: int | None = None) -> Any:
        records = await _original_fetch_records(self, consumer, active_partitions,
                                                timeout=timeout, max_records=max_records)
        acks_enabled_for = self.app.topics.acks_enabled_for
        for tp, batch in records.items():
            if batch and acks_enabled_for(tp.topic):
                guard.received((tp.topic, tp.partition), [r.offset for r in batch])
        return records

    def filter_committable(self: Any, tps: Iterable[TP]) -> dict[TP, int]:
        tps = list(tps)
        with ack_lock:
            before = {tp: list(self._acked.get(tp, ())) for tp in tps}
        wanted = _original_filter_committable(self, tps)
        by_key = {(tp.topic, tp.partition): tp for tp in wanted}
        allowed, refused = guard.clamp({k: wanted[tp] for k, tp in by_key.items()})
        for k, offset in allowed.items():
            tp = by_key[k]
            if offset < wanted[tp]:
                give_back_acks(self, tp, [o for o in before[tp] if offset <= o < wanted[tp]])
        for r in refused:
            COMMIT_REFUSED.labels(r.tp[0]).inc()
            level = logging.DEBUG if r.tp[0] in recovery.out_of_order else logging.WARNING
            log.log(level, "commit of %s-%d held at %d (Faust counted up to %d as handled; "
                    "memstream had not finished %d)", r.tp[0], r.tp[1], r.allowed, r.wanted,
                    r.allowed)
        recovery.check(self)
        return {by_key[k]: offset for k, offset in allowed.items()
                if self._should_commit(by_key[k], offset)}

    async def on_revoked(self: Any, revoked: set[TP]) -> None:
        guard.reset(_keys(revoked))
        await _original_revoked(self, revoked)

    async def on_assigned(self: Any, assigned: set[TP], generation_id: int = 0) -> None:
        guard.reset(_keys(assigned))
        await _original_assigned(self, assigned, generation_id)

    setattr(AIOKafkaConsumerThread, "_fetch_records", fetch_records)  # noqa: B010
    setattr(Consumer, "_filter_committable_offsets", filter_committable)  # noqa: B010
    setattr(Consumer, "on_partitions_revoked", on_revoked)  # noqa: B010
    setattr(Consumer, "on_partitions_assigned", on_assigned)  # noqa: B010


def give_back_acks(consumer: Any, tp: TP, offsets: Iterable[int]) -> None:
    """Faust forgets the acknowledgements up to the offset it wants to commit as it
    computes it (``Consumer._new_offset``); when the guard holds the commit lower,
    those above the held offset are given back, so the commit moves on past them
    once the record it is held at is finished (records finished out of order: a
    short run acknowledged before a long one read earlier)."""
    with ack_lock:
        index, acked = consumer._acked_index[tp], consumer._acked[tp]
        for offset in offsets:
            if offset not in index:
                index.add(offset)
                acked.append(offset)
        acked.sort()


def out_of_order_topics(kafka: KafkaSettings) -> list[str]:
    """The topics whose records are finished out of order on purpose, for
    :func:`install_commit_guard`: ``memory.retry`` (each record held until due)
    and ``memory.session-closed`` (each session end acknowledged once handled,
    a short run before a long one read earlier: :mod:`streams.worker.in_flight`).
    The chat topic's records held back over a tenant's quota are told to the guard
    one by one (:func:`hold`), the topic staying in order for the others."""
    return [kafka.retry_topic, kafka.session_closed_topic]


def finish(guard: CommitGuard, event: Any) -> None:
    """Tell ``guard`` that ``event``'s record is stored or dead-lettered."""
    m = event.message
    guard.finished((m.topic, m.partition), m.offset)


def hold(guard: CommitGuard, event: Any, held: bool) -> None:
    """Tell ``guard`` that ``event``'s record is held back on purpose (``held``), or no
    longer (taken in, or let go)."""
    m = event.message
    (guard.hold if held else guard.unhold)((m.topic, m.partition), m.offset)


def admit(guard: CommitGuard, event: Any) -> bool:
    """Whether ``event``'s record reaches memstream in order (``CommitGuard.admit``)."""
    m = event.message
    return guard.admit((m.topic, m.partition), m.offset)


class DeliverySettings(TypedDict):
    broker_max_poll_records: int
    stream_buffer_maxsize: int


def delivery_settings(batch_size: int) -> DeliverySettings:
    """Faust settings for streams read ``batch_size`` records at a time.

    A stream's buffer pauses fetching at 80 % full. A poll of at most two
    batches into a buffer of ten always fits in what is left, so delivering a
    record does not wait on a full buffer (which costs a wake-up of the
    consumer for every record the agent takes)."""
    return {"broker_max_poll_records": 2 * batch_size,
            "stream_buffer_maxsize": max(4096, 10 * batch_size)}


TimerFn = Callable[[], Awaitable[None]]


def timer(app: Any, interval_s: float, *, name: str, on_leader: bool = False,
          steady: bool = False) -> Callable[[TimerFn], TimerFn]:
    """``@app.timer``: run the coroutine every ``interval_s`` (on the leader only
    with ``on_leader``). A timer may read tables but never write them. Faust shortens
    or lengthens the next sleep by up to 0.1 s after a late or early wake-up;
    ``steady``: never, each sleep is ``interval_s``."""
    drift = interval_s if steady else 0.1  # mode corrects none when interval <= this
    return cast(Callable[[TimerFn], TimerFn],
                app.timer(interval_s, on_leader=on_leader, name=name,
                          max_drift_correction=drift))


def _headers(raw: Any) -> Headers:
    if not raw:
        return []
    items = raw.items() if isinstance(raw, dict) else raw
    return [(str(k), bytes(v) if v is not None else b"") for k, v in items]


def source_record(event: Any) -> SourceRecord:
    m = event.message
    return SourceRecord(
        topic=m.topic,
        partition=m.partition,
        offset=m.offset,
        key=m.key,
        value=m.value,
        headers=_headers(m.headers),
        timestamp=m.timestamp,
        handle=event,
    )


class FaustTable(SessionTable):
    """A Faust table behind the :class:`~streams.session.ports.SessionTable` port."""

    def __init__(self, table: Any) -> None:
        self._table = table

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored value itself (callers only read it)."""
        return cast(dict[str, Any] | None, self._table.get(key))

    def set(self, key: str, value: dict[str, Any]) -> None:
        self._table[key] = value

    def stored_keys(self) -> list[str]:
        return [k for k, v in self._table.items() if v is not None]

    def delete(self, key: str) -> None:
        """Remove ``key``: a tombstone in the changelog, so compaction forgets it."""
        if key in self._table:
            del self._table[key]

    @contextmanager
    def context(self, record: SourceRecord) -> Iterator[None]:
        with event_context(record.handle):
            yield

    def keys(self) -> list[str]:
        """Every key, at once (the table may change after)."""
        return list(self._table.keys())

    def items(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Every stored value itself (callers only read it)."""
        return ((k, v) for k, v in self._table.items() if v is not None)


class QuietWorker(faust.Worker):
    def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
        self.spinner = None
        super().on_setup_root_logger(logger, level)
        redact_logs(logger)  # no SQL, row contents or credentials in any log line
