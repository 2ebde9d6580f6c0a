"""The query consumer's read-ahead against a fake aiokafka consumer: requests queued
per tenant and started in turn, a loud tenant's overflow refused at once, commits
never past a request queued or unanswered, queued requests let go uncommitted at a
revocation or a shutdown."""

from __future__ import annotations

import asyncio

from aiokafka import TopicPartition

from streams.adapters.kafka.query_consumer import QueryConsumer
from streams.adapters.kafka.query_consumer_config import QueryConsumerConfig
from streams.wire.envelope import SourceRecord
from tests.agents.test_query_consumer import P0, P1, TOPIC, FakeKafka, Gates, Record, last_commit
from tests.support.worker import eventually

LOUD, CALM = b"loud/u", b"calm/u"
SLOTS, READ_AHEAD = 4, 16
LOUD_SLOTS = SLOTS - 1  # alone, it never takes the last free slot
LOUD_QUEUED = READ_AHEAD // 2  # alone, its share of the read-ahead


class Shed:
    """The refusals, answered at once."""

    def __init__(self) -> None:
        self.offsets: list[tuple[int, int]] = []

    async def __call__(self, rec: SourceRecord) -> None:
        self.offsets.append((rec.partition, rec.offset))


def feed(kafka: FakeKafka, tp: TopicPartition, key: bytes, *offsets: int) -> None:
    kafka.queued.setdefault(tp, []).extend(
        Record(tp.topic, tp.partition, o, key=key) for o in offsets)
    kafka.ends[tp] = max([kafka.ends.get(tp, 0), *(o + 1 for o in offsets)])


async def started(kafka: FakeKafka, gates: Gates, shed: Shed,
                  read_ahead_bytes: int = 0, busy: list[bool] | None = None) -> QueryConsumer:
    """Started, and calm's first request answered; ``busy``: whether the process is
    busy (its first item, changed by the test; none: never)."""
    config = QueryConsumerConfig(broker="kafka://x", topic=TOPIC, group_id="g", client_id="c",
                                 concurrency=SLOTS, read_ahead=READ_AHEAD,
                                 read_ahead_bytes=read_ahead_bytes, drain_timeout_s=0.3,
                                 contended_slots=1)
    q = QueryConsumer(config, connect=lambda c: kafka,
                      busy=None if busy is None else (lambda: busy[0]))
    q.start(gates, shed=shed)
    await eventually(lambda: kafka.listener is not None, 5, "the subscription")
    await kafka.rebalance({P0, P1})
    assert await q.wait_assigned(1.0)
    # calm asks now and then: it was seen lately, so loud's overflow is shed for it
    feed(kafka, P1, CALM, 0)
    gates.release(1, 0)
    await eventually(lambda: (1, 0) in gates.answered, 5, "calm's first request answered")
    gates.started.remove((1, 0))
    gates.answered.remove((1, 0))
    return q


async def test_a_tenant_alone_is_not_shed_for_its_backlog() -> None:
    """A backlog of one tenant (a partition taken over after a worker's death) waits,
    held by the bound on what is read; nothing of it is refused."""
    kafka, gates, shed = FakeKafka(), Gates(), Shed()
    config = QueryConsumerConfig(broker="kafka://x", topic=TOPIC, group_id="g", client_id="c",
                                 concurrency=SLOTS, read_ahead=READ_AHEAD, drain_timeout_s=0.3)
    q = QueryConsumer(config, connect=lambda c: kafka)
    q.start(gates, shed=shed)
    await eventually(lambda: kafka.listener is not None, 5, "the subscription")
    await kafka.rebalance({P0, P1})
    assert await q.wait_assigned(1.0)
    feed(kafka, P0, LOUD, *range(100))
    await eventually(lambda: len(gates.started) == LOUD_SLOTS, 5, "the slots taken")
    await asyncio.sleep(0.1)
    assert shed.offsets == [] and kafka.largest_fetch <= SLOTS + READ_AHEAD
    gates.release(0, *range(100))
    await eventually(lambda: len(gates.answered) == 100, 5, "every request answered")
    assert shed.offsets == []
    await q.stop()


async def test_the_backlog_a_partition_came_with_is_not_shed() -> None:
    """Requests that were on the partition when it was assigned here (a worker died,
    or a rebalance moved it) waited through no fault of their tenant: never shed."""
    kafka, gates, shed = FakeKafka(), Gates(), Shed()
    config = QueryConsumerConfig(broker="kafka://x", topic=TOPIC, group_id="g", client_id="c",
                                 concurrency=SLOTS, read_ahead=READ_AHEAD, drain_timeout_s=0.3)
    q = QueryConsumer(config, connect=lambda c: kafka)
    q.start(gates, shed=shed)
    await eventually(lambda: kafka.listener is not None, 5, "the subscription")
    feed(kafka, P1, CALM, 0)  # another tenant, seen as the backlog is read
    feed(kafka, P0, LOUD, *range(60))  # on the partition before it is assigned
    await kafka.rebalance({P0, P1})
    assert await q.wait_assigned(1.0)
    gates.release(1, 0)
    gates.release(0, *range(60))
    await eventually(lambda: len(gates.answered) == 61, 5, "every request answered")
    assert shed.offsets == []
    feed(kafka, P0, LOUD, *range(60, 160))  # a flood that comes after: shed beyond its share
    await eventually(lambda: len(shed.offsets) > 0, 5, "the flood's overflow refused")
    gates.release(0, *range(60, 160))
    await q.stop()


def unanswered(gates: Gates, shed: Shed, partition: int, end: int) -> list[int]:
    done = set(gates.answered) | set(shed.offsets)
    return [o for o in range(end) if (partition, o) not in done]


async def test_a_calm_request_starts_at_once_behind_a_loud_backlog_on_its_partition() -> None:
    kafka, gates, shed = FakeKafka(), Gates(), Shed()
    q = await started(kafka, gates, shed)
    feed(kafka, P0, LOUD, *range(500))
    feed(kafka, P0, CALM, 500)
    await eventually(lambda: (0, 500) in gates.started, 5, "calm's request started")
    # behind loud's first requests only, none of which was answered
    assert gates.started.index((0, 500)) <= LOUD_SLOTS
    assert gates.answered == []
    gates.release(0, 500)
    await eventually(lambda: (0, 500) in gates.answered, 5, "calm answered")
    await q.stop()


async def test_loud_overflow_is_refused_at_once_and_its_queue_stays_bounded() -> None:
    kafka, gates, shed = FakeKafka(), Gates(), Shed()
    q = await started(kafka, gates, shed)
    feed(kafka, P0, LOUD, *range(500))
    feed(kafka, P0, CALM, 500)
    refused = 500 - LOUD_SLOTS - LOUD_QUEUED
    await eventually(lambda: len(shed.offsets) == refused, 5, "loud's overflow refused")
    await asyncio.sleep(0.1)
    assert len(shed.offsets) == refused and (0, 500) not in shed.offsets
    assert sorted(gates.started) == [(0, 0), (0, 1), (0, 2), (0, 500)]
    assert q.queued() == LOUD_QUEUED
    assert kafka.largest_fetch <= SLOTS + READ_AHEAD
    # the queued ones start as slots free up, and all is answered exactly once
    gates.release(0, *range(501))
    await eventually(lambda: len(gates.answered) == 500 - refused + 1, 5, "all answered")
    assert not set(gates.answered) & set(shed.offsets)
    await eventually(lambda: last_commit(kafka, P0) == 501, 5, "all committed")
    await q.stop()


async def test_commits_never_pass_a_queued_or_unanswered_request() -> None:
    kafka, gates, shed = FakeKafka(), Gates(), Shed()
    q = await started(kafka, gates, shed)
    feed(kafka, P0, LOUD, *range(500))
    await eventually(lambda: len(shed.offsets) == 500 - LOUD_SLOTS - LOUD_QUEUED, 5,
                     "loud's overflow refused")
    await asyncio.sleep(0.1)
    assert last_commit(kafka, P0) is None  # refusals answered, offset 0 still in flight
    gates.release(0, 0, 1, 2)  # the ones started: queued ones take their slots
    await eventually(lambda: len(gates.answered) == 3, 5, "the first answered")
    await eventually(lambda: last_commit(kafka, P0) is not None, 5, "a commit")
    await asyncio.sleep(0.1)
    # up to the first request queued or in flight, never past it
    assert last_commit(kafka, P0) == unanswered(gates, shed, 0, 500)[0] == 3
    for o in unanswered(gates, shed, 0, 500):
        gates.release(0, o)
        await eventually(lambda o=o: (0, o) in gates.answered, 5, "answered")
        commit = last_commit(kafka, P0)
        left = unanswered(gates, shed, 0, 500)
        assert commit is not None and commit <= (left[0] if left else 500)
    await eventually(lambda: last_commit(kafka, P0) == 500, 5, "all committed")
    await q.stop()


async def test_revocation_lets_the_queued_requests_go_uncommitted() -> None:
    kafka, gates, shed = FakeKafka(), Gates(), Shed()
    q = await started(kafka, gates, shed)
    feed(kafka, P0, LOUD, *range(500))
    await eventually(lambda: len(shed.offsets) == 500 - LOUD_SLOTS - LOUD_QUEUED, 5,
                     "loud's overflow refused")
    await asyncio.sleep(0.1)
    assert q.queued() == LOUD_QUEUED
    queued = unanswered(gates, shed, 0, 500)[LOUD_SLOTS:]

    async def answer_soon() -> None:
        await asyncio.sleep(0.05)
        gates.release(0, 0, 1, 2)  # the ones in flight answer during the drain

    releasing = asyncio.create_task(answer_soon())
    await kafka.rebalance({P1})
    await releasing
    assert q.queued() == 0
    assert last_commit(kafka, P0) == queued[0] == 3  # the next owner starts there
    await asyncio.sleep(0.1)
    assert not {(0, o) for o in queued} & set(gates.started)  # never started here
    assert not {(0, o) for o in queued} & set(shed.offsets)
    await q.stop()


async def test_shutdown_lets_the_queued_requests_go_uncommitted() -> None:
    kafka, gates, shed = FakeKafka(), Gates(), Shed()
    q = await started(kafka, gates, shed)
    feed(kafka, P0, LOUD, *range(50))
    await eventually(lambda: len(shed.offsets) == 50 - LOUD_SLOTS - LOUD_QUEUED, 5,
                     "loud's overflow refused")
    await asyncio.sleep(0.1)
    queued = unanswered(gates, shed, 0, 50)[LOUD_SLOTS:]

    async def answer_soon() -> None:
        await asyncio.sleep(0.05)
        gates.release(0, 0, 1, 2)  # the ones in flight answer during the drain

    releasing = asyncio.create_task(answer_soon())
    await q.stop()
    await releasing
    assert q.queued() == 0
    assert last_commit(kafka, P0) == queued[0] == 3
    assert not {(0, o) for o in queued} & set(gates.started)


async def test_the_read_ahead_is_bounded_in_bytes_too() -> None:
    kafka, gates, shed = FakeKafka(), Gates(), Shed()
    size = len(LOUD) + len(b"{}")  # of each record: its key and value
    # alone, loud's share is half: two records' bytes, not LOUD_QUEUED records
    q = await started(kafka, gates, shed, read_ahead_bytes=4 * size)
    feed(kafka, P0, LOUD, *range(100))
    feed(kafka, P0, CALM, 100)
    await eventually(lambda: (0, 100) in gates.started, 5, "calm's request started")
    await eventually(lambda: len(shed.offsets) == 100 - LOUD_SLOTS - 2, 5, "loud refused")
    assert q.queued() == 2
    gates.release(0, *range(101))
    await eventually(lambda: last_commit(kafka, P0) == 101, 5, "all committed")
    await q.stop()


async def test_a_busy_process_gives_each_active_tenant_one_slot() -> None:
    """Busy, with calm asking lately: loud's backlog takes one slot at a time (the rest
    queued, its overflow refused), calm's next request starts at once; once the process
    is not busy, loud borrows the free slots but the last again, without waiting for
    one of its requests to end."""
    kafka, gates, shed = FakeKafka(), Gates(), Shed()
    busy = [True]
    q = await started(kafka, gates, shed, busy=busy)
    feed(kafka, P0, LOUD, *range(50))
    await eventually(lambda: len(shed.offsets) == 50 - 1 - LOUD_QUEUED, 5, "loud refused")
    await asyncio.sleep(0.1)
    assert gates.started == [(0, 0)] and q.queued() == LOUD_QUEUED
    feed(kafka, P1, CALM, 1)
    await eventually(lambda: (1, 1) in gates.started, 5, "calm's request started")
    assert gates.most_in_flight == 2
    gates.release(1, 1)
    gates.release(0, 0)  # loud's next, one at a time
    await eventually(lambda: (0, 1) in gates.started, 5, "loud's next started")
    await asyncio.sleep(0.1)
    assert gates.in_flight == 1
    busy[0] = False  # nothing answered meanwhile: the queue borrows all slots but one
    await eventually(lambda: gates.in_flight == LOUD_SLOTS, 5, "loud borrowing")
    gates.release(0, *range(50))
    await eventually(lambda: last_commit(kafka, P0) == 50, 5, "all committed")
    await q.stop()


async def test_a_backlog_held_to_one_slot_borrows_once_the_loop_is_idle() -> None:
    """A backlog the partition came with fills what the consumer reads (none of it is
    shed), so nothing more is fetched; held to one slot while the loop is busy, it
    takes the free slots once the loop is idle, before its request in flight ends."""
    kafka, gates, shed = FakeKafka(), Gates(), Shed()
    busy = [True]
    config = QueryConsumerConfig(broker="kafka://x", topic=TOPIC, group_id="g", client_id="c",
                                 concurrency=SLOTS, read_ahead=READ_AHEAD, drain_timeout_s=0.3,
                                 contended_slots=1)
    q = QueryConsumer(config, connect=lambda c: kafka, busy=lambda: busy[0])
    q.start(gates, shed=shed)
    await eventually(lambda: kafka.listener is not None, 5, "the subscription")
    feed(kafka, P1, CALM, 0)
    feed(kafka, P0, LOUD, *range(100))  # on the partition before it is assigned
    await kafka.rebalance({P0, P1})
    assert await q.wait_assigned(1.0)
    await eventually(lambda: (1, 0) in gates.started, 5, "calm's request started")
    gates.release(1, 0)
    await eventually(lambda: (1, 0) in gates.answered, 5, "calm answered")
    await asyncio.sleep(0.3)
    assert gates.in_flight == 1 and shed.offsets == []  # loud's one slot, the rest read
    busy[0] = False
    await eventually(lambda: gates.in_flight == LOUD_SLOTS, 5, "loud borrowing")
    gates.release(0, *range(100))
    await eventually(lambda: last_commit(kafka, P0) == 100, 5, "all committed")
    await q.stop()
