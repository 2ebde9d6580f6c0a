"""The query consumer's delivery rules against a fake aiokafka consumer: bounded
concurrency, commits never past an unanswered request, revocation drains, commits
and lets go of what did not finish."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiokafka import TopicPartition
from prometheus_client import REGISTRY

from streams.adapters.kafka.query_consumer import QueryConsumer
from streams.adapters.kafka.query_consumer_config import QueryConsumerConfig
from streams.wire.envelope import SourceRecord
from tests.support.worker import eventually

TOPIC = "q"
P0, P1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)


@dataclass
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None = b"k"
    value: bytes | None = b"{}"
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp: int = 1_800_000_000_000


@dataclass
class FakeKafka:
    """What the query consumer uses of aiokafka's consumer."""

    queued: dict[TopicPartition, list[Record]] = field(default_factory=dict)
    assigned: set[TopicPartition] = field(default_factory=set)
    commits: list[dict[TopicPartition, int]] = field(default_factory=list)
    group_committed: dict[TopicPartition, int] = field(default_factory=dict)
    listener: Any = None
    stopped: bool = False
    largest_fetch: int = 0
    ends: dict[TopicPartition, int] = field(default_factory=dict)

    async def start(self) -> None:
        return None

    def subscribe(self, topics: list[str], listener: Any) -> None:
        self.listener = listener

    async def stop(self) -> None:
        self.stopped = True

    def feed(self, tp: TopicPartition, *offsets: int) -> None:
        self.queued.setdefault(tp, []).extend(Record(tp.topic, tp.partition, o) for o in offsets)
        self.ends[tp] = max([self.ends.get(tp, 0), *(o + 1 for o in offsets)])

    async def getmany(self, *partitions: TopicPartition, timeout_ms: int,
                      max_records: int) -> dict[TopicPartition, list[Any]]:
        """As aiokafka hands out fetched records: one partition's until they are used up,
        then the next one's (of ``partitions``, when given)."""
        out: dict[TopicPartition, list[Any]] = {}
        room = max_records
        for tp in sorted(self.assigned):
            if partitions and tp not in partitions:
                continue
            take = self.queued.get(tp, [])[:room]
            if take:
                out[tp] = take
                self.queued[tp] = self.queued[tp][len(take):]
                room -= len(take)
        self.largest_fetch = max(self.largest_fetch, max_records - room)
        if not out and timeout_ms:
            await asyncio.sleep(0.01)
        return out

    async def commit(self, offsets: dict[TopicPartition, int]) -> None:
        self.commits.append(dict(offsets))
        self.group_committed.update(offsets)

    def assignment(self) -> set[TopicPartition]:
        return set(self.assigned)

    async def committed(self, tp: TopicPartition) -> int | None:
        return self.group_committed.get(tp)

    def highwater(self, tp: TopicPartition) -> int | None:
        return None

    async def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The offset after the newest record fed so far (consumed or not)."""
        return {tp: self.ends.get(tp, 0) for tp in tps}

    async def rebalance(self, new: set[TopicPartition]) -> None:
        await self.listener.on_partitions_revoked(set(self.assigned))
        self.assigned = set(new)
        await self.listener.on_partitions_assigned(set(new))


class Gates:
    """An answer per offset, released by the test."""

    def __init__(self) -> None:
        self.gates: dict[tuple[int, int], asyncio.Event] = {}
        self.started: list[tuple[int, int]] = []
        self.answered: list[tuple[int, int]] = []
        self.in_flight = 0
        self.most_in_flight = 0

    def gate(self, partition: int, offset: int) -> asyncio.Event:
        return self.gates.setdefault((partition, offset), asyncio.Event())

    def release(self, partition: int, *offsets: int) -> None:
        for o in offsets:
            self.gate(partition, o).set()

    async def __call__(self, rec: SourceRecord) -> None:
        key = (rec.partition, rec.offset)
        self.started.append(key)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.gate(*key).wait()
            self.answered.append(key)
        finally:
            self.in_flight -= 1


def consumer(kafka: FakeKafka, concurrency: int = 4,
             drain_timeout_s: float = 0.3) -> QueryConsumer:
    config = QueryConsumerConfig(broker="kafka://x", topic=TOPIC, group_id="g", client_id="c",
                                 concurrency=concurrency, drain_timeout_s=drain_timeout_s)
    return QueryConsumer(config, connect=lambda c: kafka)


def last_commit(kafka: FakeKafka, tp: TopicPartition) -> int | None:
    for c in reversed(kafka.commits):
        if tp in c:
            return c[tp]
    return None


async def started(kafka: FakeKafka, gates: Gates) -> QueryConsumer:
    q = consumer(kafka)
    q.start(gates)
    await eventually(lambda: kafka.listener is not None, 5, "the subscription")
    await kafka.rebalance({P0, P1})
    assert await q.wait_assigned(1.0)
    return q


async def test_commits_follow_the_first_unanswered_request_of_each_partition() -> None:
    kafka, gates = FakeKafka(), Gates()
    q = await started(kafka, gates)
    kafka.feed(P0, 0, 1, 2)
    kafka.feed(P1, 7)
    await eventually(lambda: len(gates.started) == 4, 5, "four requests in flight")
    gates.release(0, 2, 1)  # later ones first
    gates.release(1, 7)
    await eventually(lambda: last_commit(kafka, P1) == 8, 5, "partition 1 committed")
    assert last_commit(kafka, P0) is None  # offset 0 still waits: nothing past it
    assert q.committed(P0) == 0 and q.committed(P1) == 8  # where it started; committed
    gates.release(0, 0)
    await eventually(lambda: last_commit(kafka, P0) == 3, 5, "partition 0 committed")
    assert q.tracker.committed == {(TOPIC, 0): 3, (TOPIC, 1): 8}
    await q.stop()
    assert kafka.stopped


async def test_never_more_than_concurrency_requests_in_flight() -> None:
    kafka, gates = FakeKafka(), Gates()
    q = await started(kafka, gates)
    kafka.feed(P0, *range(10))
    await eventually(lambda: len(gates.started) == 4, 5, "the first four")
    await asyncio.sleep(0.1)
    assert len(gates.started) == 4 and kafka.largest_fetch <= 4
    gates.release(0, 0)
    await eventually(lambda: len(gates.started) == 5, 5, "one more, once a slot is free")
    gates.release(0, *range(1, 10))
    await eventually(lambda: last_commit(kafka, P0) == 10, 5, "all committed")
    assert gates.most_in_flight == 4
    await q.stop()


async def test_a_backlog_does_not_hold_up_the_other_partitions() -> None:
    kafka, gates = FakeKafka(), Gates()
    q = await started(kafka, gates)
    kafka.feed(P0, *range(100))  # a partition taken over with its backlog
    kafka.feed(P1, 0, 1)
    await eventually(lambda: len(gates.started) == 4, 5, "the slots filled")
    assert {(1, 0), (1, 1)} <= set(gates.started)  # not behind the 100 of partition 0
    gates.release(1, 0, 1)
    await eventually(lambda: len(gates.answered) == 2, 5, "partition 1 answered")
    await eventually(lambda: len(gates.started) == 6, 5, "partition 0 takes the free slots")
    assert gates.started[4:] == [(0, 2), (0, 3)]
    gates.release(0, *range(100))
    await eventually(lambda: len(gates.answered) == 102, 10, "the backlog answered")
    assert gates.most_in_flight == 4
    await q.stop()


async def test_one_busy_partition_still_gets_every_slot() -> None:
    kafka, gates = FakeKafka(), Gates()
    q = await started(kafka, gates)
    kafka.feed(P1, *range(10))
    await eventually(lambda: len(gates.started) == 4, 5, "the slots filled")
    await asyncio.sleep(0.1)
    assert gates.started == [(1, 0), (1, 1), (1, 2), (1, 3)]
    gates.release(1, *range(10))
    await eventually(lambda: len(gates.answered) == 10, 5, "all answered")
    await q.stop()


async def test_revocation_drains_commits_and_lets_go_of_what_did_not_finish() -> None:
    kafka, gates = FakeKafka(), Gates()
    q = await started(kafka, gates)
    abandoned = REGISTRY.get_sample_value("memstream_query_abandoned_total") or 0.0
    kafka.feed(P0, 0, 1, 2)
    kafka.feed(P1, 0)
    await eventually(lambda: len(gates.started) == 4, 5, "four requests in flight")

    async def answer_soon() -> None:
        await asyncio.sleep(0.05)
        gates.release(0, 0, 2)  # 1 hangs past the drain timeout
        gates.release(1, 0)

    releasing = asyncio.create_task(answer_soon())
    await kafka.rebalance({P1})
    await releasing
    # answered during the drain and committed before the partitions went: 0 (and 2,
    # which must not be committed past the unanswered 1)
    assert last_commit(kafka, P0) == 1 and last_commit(kafka, P1) == 1
    assert (0, 1) not in gates.answered
    assert (REGISTRY.get_sample_value("memstream_query_abandoned_total") or 0.0) == abandoned + 1
    assert q.tracker.assignments == 2 and q.tracker.rebalancing_since is None
    # the next owner of partition 0 starts at 1; this worker goes on with partition 1
    kafka.feed(P1, 1)
    await eventually(lambda: (1, 1) in gates.started, 5, "partition 1 goes on")
    gates.release(1, 1)
    await eventually(lambda: last_commit(kafka, P1) == 2, 5, "committed")
    assert q.partitions() == [1]
    await q.stop()


class GraceAnswers(Gates):
    """Requests whose reply is on its way when cancelled: offset 1's goes out within
    the grace (the request ends answered), the others' do not (cancelled)."""

    async def __call__(self, rec: SourceRecord) -> None:
        try:
            await super().__call__(rec)
        except asyncio.CancelledError:
            if rec.offset != 1:
                raise
            await asyncio.sleep(0.05)  # the broker takes the reply, it is recorded
            self.answered.append((rec.partition, rec.offset))


async def test_a_request_answered_during_the_drain_s_grace_is_committed_not_let_go() -> None:
    kafka, gates = FakeKafka(), GraceAnswers()
    q = await started(kafka, gates)
    abandoned = REGISTRY.get_sample_value("memstream_query_abandoned_total") or 0.0
    kafka.feed(P0, 0, 1, 2)
    await eventually(lambda: len(gates.started) == 3, 5, "three requests in flight")
    gates.release(0, 0)
    await kafka.rebalance({P1})  # 1 and 2 outlast the drain; 1's reply goes out
    assert (0, 1) in gates.answered and (0, 2) not in gates.answered
    assert last_commit(kafka, P0) == 2  # 0 and 1 answered: the next owner starts at 2
    assert (REGISTRY.get_sample_value("memstream_query_abandoned_total") or 0.0) == abandoned + 1
    await q.stop()


async def test_stop_answers_what_is_in_flight_commits_and_leaves() -> None:
    kafka, gates = FakeKafka(), Gates()
    q = await started(kafka, gates)
    kafka.feed(P0, 5, 6)
    await eventually(lambda: len(gates.started) == 2, 5, "two in flight")
    stopping = asyncio.create_task(q.stop())
    await asyncio.sleep(0.05)
    assert not stopping.done()
    gates.release(0, 5, 6)
    await stopping
    assert last_commit(kafka, P0) == 7 and kafka.stopped and not q.started()


async def test_the_lag_probe_knows_the_committed_offsets_from_the_assignment_on() -> None:
    kafka, gates = FakeKafka(group_committed={P0: 40}), Gates()
    q = await started(kafka, gates)
    assert q.assigned() == {P0, P1}  # P1: never committed by the group, lag from the start
    assert q.committed(P0) == 40 and q.committed(P1) is None
    await q.stop()


async def test_the_backlog_at_assignment_may_have_been_delivered_before() -> None:
    """What was in a partition when it was assigned may have been answered by its
    previous owner; what was produced since is new to the group."""
    kafka, gates = FakeKafka(), Gates()
    kafka.feed(P0, 0, 1, 2)
    q = await started(kafka, gates)  # P0 and P1 assigned
    kafka.feed(P0, 3)
    assert [q.maybe_seen(SourceRecord(TOPIC, 0, o, b"k", b"{}")) for o in (0, 2, 3)] == [
        True, True, False]
    assert not q.maybe_seen(SourceRecord(TOPIC, 1, 0, b"k", b"{}"))  # empty when assigned
    assert q.maybe_seen(SourceRecord(TOPIC, 2, 0, b"k", b"{}"))  # not assigned: unknown
    gates.release(0, 0, 1, 2, 3)
    await q.stop()


async def test_the_group_counts_as_stopped_only_from_a_heartbeat_after_a_revocation() -> None:
    """What the rescuer reads (``rebalancing``): not before the first assignment (a
    member that cannot join says nothing of the others), not in the first heartbeat
    after a revocation (the others may still read), not past a rebalance's longest."""
    kafka, gates = FakeKafka(), Gates()
    q = consumer(kafka)
    q.start(gates)
    await eventually(lambda: kafka.listener is not None, 5, "the subscription")
    assert kafka.listener is not None
    await kafka.listener.on_partitions_revoked(set())  # aiokafka's call before a join
    assert q.partitions() == [] and not q.rebalancing(time.monotonic() + 2.0)
    await kafka.rebalance({P0, P1})
    assert await q.wait_assigned(1.0) and not q.rebalancing()
    revoked = time.monotonic()
    await kafka.listener.on_partitions_revoked({P0, P1})
    hb, longest = q.config.heartbeat_interval_s, (q.config.session_timeout_s
                                                  + q.config.drain_timeout_s)
    assert not q.rebalancing(revoked + hb / 2)
    assert q.rebalancing(revoked + hb + 0.01)
    assert not q.rebalancing(revoked + longest + 0.5)
    await kafka.listener.on_partitions_assigned({P0})
    assert not q.rebalancing(revoked + hb + 0.01)
    await q.stop()


@pytest.mark.parametrize("read_ahead", [0, 8])
async def test_a_request_whose_reply_is_out_leaves_its_slot_and_commits_once_settled(
        read_ahead: int) -> None:
    """What an answer finishes after its reply is out (its record's durable write) is
    waited for outside the slots: with one slot, the next request starts meanwhile; a
    request is committed only once its own has finished."""
    kafka = FakeKafka()
    settles: dict[int, asyncio.Future[None]] = {}

    async def answer(rec: SourceRecord) -> asyncio.Future[None]:
        settles[rec.offset] = asyncio.get_running_loop().create_future()
        return settles[rec.offset]

    config = QueryConsumerConfig(broker="kafka://x", topic=TOPIC, group_id="g", client_id="c",
                                 concurrency=1, read_ahead=read_ahead)
    q = QueryConsumer(config, connect=lambda c: kafka)
    q.start(answer, shed=answer)
    await eventually(lambda: kafka.listener is not None, 5, "the subscription")
    await kafka.rebalance({P0})
    kafka.feed(P0, 0, 1, 2)
    await eventually(lambda: sorted(settles) == [0, 1, 2], 5, "each started, none settled")
    settles[1].set_result(None)
    await asyncio.sleep(0.05)
    assert last_commit(kafka, P0) is None  # the first has not finished
    settles[0].set_result(None)
    await eventually(lambda: last_commit(kafka, P0) == 2, 5, "the first two committed")
    settles[2].set_result(None)
    await eventually(lambda: last_commit(kafka, P0) == 3, 5, "all committed")
    await q.stop()


async def test_answered_requests_whose_records_never_settle_are_bounded() -> None:
    """Requests whose reply is out and whose record's write never ends take no slot, up to
    ``settling_max`` of them; beyond that they take room from the fetch, so no more is
    read; none is committed; a stop ends after its drain all the same."""
    kafka = FakeKafka()
    pending: list[asyncio.Future[None]] = []

    async def answer(rec: SourceRecord) -> asyncio.Future[None]:
        pending.append(asyncio.get_running_loop().create_future())
        return pending[-1]

    config = QueryConsumerConfig(broker="kafka://x", topic=TOPIC, group_id="g", client_id="c",
                                 concurrency=4, drain_timeout_s=0.1, settling_max=20)
    q = QueryConsumer(config, connect=lambda c: kafka)
    q.start(answer)
    await eventually(lambda: kafka.listener is not None, 5, "the subscription")
    await kafka.rebalance({P0})
    kafka.feed(P0, *range(100))
    await eventually(lambda: len(pending) == 24, 5, "4 slots and 20 settling")
    await asyncio.sleep(0.2)
    assert len(pending) == 24 and last_commit(kafka, P0) is None
    await asyncio.wait_for(q.stop(), 5)
    assert last_commit(kafka, P0) is None
