"""Consumer lag, progress, rebalances and commit latency, fed by fakes of Faust's consumer."""

from __future__ import annotations

import asyncio
from typing import Any

from faust.sensors.prometheus import FaustMetrics
from faust.types import TP
from prometheus_client import REGISTRY, CollectorRegistry

from streams.adapters.kafka.progress import ProgressTracker
from streams.worker.kafka_monitor import KafkaMonitor, LagSampler

TOPIC = "it-lag.chat"


def lag_of(partition: int, topic: str = TOPIC) -> float | None:
    return REGISTRY.get_sample_value("memstream_consumer_lag",
                                     {"topic": topic, "partition": str(partition)})


def value(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


class FakeProbe:
    """What :class:`ConsumerProbe` reads from Faust, set by the test."""

    def __init__(self) -> None:
        self.tps: set[TP] = set()
        self.fetched: dict[TP, int] = {}  # highwater the fetches reported
        self.committed_offsets: dict[TP, int] = {}
        self.broker_ends: dict[TP, int] = {}
        self.broker_starts: dict[TP, int] = {}
        self.requests = 0
        self.release = asyncio.Event()
        self.release.set()

    def assigned(self) -> set[TP]:
        return set(self.tps)

    def highwater(self, tp: TP) -> int | None:
        return self.fetched.get(tp)

    def committed(self, tp: TP) -> int | None:
        return self.committed_offsets.get(tp)

    async def end_offsets(self, tps: list[TP]) -> tuple[dict[TP, int], dict[TP, int]]:
        self.requests += 1
        await self.release.wait()
        return ({tp: self.broker_ends[tp] for tp in tps if tp in self.broker_ends},
                {tp: self.broker_starts[tp] for tp in tps if tp in self.broker_starts})


async def settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


async def test_lag_per_partition_and_series_of_lost_partitions_go() -> None:
    probe = FakeProbe()
    tracker = ProgressTracker(started_at=0.0, stage_of={TOPIC: "ingest"},
                              exempt=frozenset({"memory.retry"}))
    sampler = LagSampler(probe, tracker, end_offsets_interval_s=1000.0)
    p0, p1, p2 = TP(TOPIC, 0), TP(TOPIC, 1), TP(TOPIC, 2)
    probe.tps = {p0, p1, p2}
    probe.fetched = {p0: 100, p1: 10, p2: 7}
    probe.committed_offsets = {p0: 40, p1: 10}
    probe.broker_starts = {p2: 2}
    sampler.sample(now=1.0)
    await settle()
    lag = sampler.sample(now=2.0)
    assert lag == {(TOPIC, 0): 60, (TOPIC, 1): 0, (TOPIC, 2): 5}  # p2: from its log start
    assert (lag_of(0), lag_of(1), lag_of(2)) == (60.0, 0.0, 5.0)
    assert tracker.stall_lag() == 65 and tracker.stages["ingest"].lag_since == 1.0
    assert REGISTRY.get_sample_value("memstream_stage_lag", {"stage": "ingest"}) == 65.0

    probe.tps = {p0, p1}  # p2 went to another worker
    sampler.sample(now=3.0)
    assert lag_of(2) is None and lag_of(0) == 60.0
    sampler.on_revoked({p1})  # the revocation signal removes it at once
    assert lag_of(1) is None and lag_of(0) == 60.0
    await sampler.close()
    sampler.on_revoked({p0})
    assert lag_of(0) is None


async def test_a_partition_never_fetched_gets_its_end_offset_from_the_broker() -> None:
    probe, tracker = FakeProbe(), ProgressTracker(started_at=0.0)
    sampler = LagSampler(probe, tracker, end_offsets_interval_s=5.0)
    tp = TP(TOPIC, 3)
    probe.tps = {tp}
    probe.broker_ends = {tp: 42}
    probe.release.clear()
    assert sampler.sample(now=0.0) == {(TOPIC, 3): None}
    assert tracker.unknown == {(TOPIC, 3)} and lag_of(3) is None
    await settle()
    sampler.sample(now=10.0)  # the first request is still out: no second one
    await settle()
    assert probe.requests == 1
    probe.release.set()
    await settle()
    # the answer is used; the next request went out as well (due since 5.0)
    assert sampler.sample(now=11.0) == {(TOPIC, 3): 42}
    assert lag_of(3) == 42.0
    await settle()
    assert probe.requests == 2
    sampler.sample(now=12.0)  # started at 11.0: the next one is due at 16.0
    await settle()
    assert probe.requests == 2
    probe.fetched = {tp: 50}  # fetches report a newer end than the broker did
    probe.committed_offsets = {tp: 45}
    assert sampler.sample(now=13.0) == {(TOPIC, 3): 5}
    sampler.sample(now=16.0)
    await settle()
    assert probe.requests == 3
    await sampler.close()
    sampler.on_revoked({tp})


class FakeApp:
    rebalancing_count = 1


def monitor() -> tuple[KafkaMonitor, ProgressTracker]:
    tracker = ProgressTracker(started_at=0.0, stage_of={TOPIC: "ingest",
                                                        "it-lag.closed": "consolidation"})
    return KafkaMonitor(tracker, metrics=FaustMetrics.create(CollectorRegistry(), "t")), tracker


def test_progress_is_set_at_start_and_advanced_by_commits() -> None:
    started = value("memstream_consumer_last_progress_timestamp_seconds")
    mon, tracker = monitor()
    at_start = value("memstream_consumer_last_progress_timestamp_seconds")
    assert at_start >= started and at_start > 0
    stage_at_start = stage_progress("ingest")
    assert stage_at_start >= started and stage_progress("consolidation") >= started
    mon.on_tp_commit({TP(TOPIC, 0): 10})
    first = value("memstream_consumer_last_progress_timestamp_seconds")
    assert first >= at_start and tracker.committed == {(TOPIC, 0): 10}
    assert stage_progress("ingest") >= stage_at_start
    before = tracker.last_progress_at
    mon.on_tp_commit({TP(TOPIC, 0): 10})  # no advance
    assert tracker.last_progress_at == before


def stage_progress(stage: str) -> float:
    return REGISTRY.get_sample_value("memstream_stage_last_progress_timestamp_seconds",
                                     {"stage": stage}) or 0.0


def test_commit_latency_counts_commits_that_committed_something() -> None:
    mon, _ = monitor()
    count = value("memstream_commit_seconds_count")
    state = mon.on_commit_initiated(consumer=None)
    mon.on_commit_completed(None, state)  # nothing was acknowledged: no commit
    assert value("memstream_commit_seconds_count") == count
    state = mon.on_commit_initiated(consumer=None)
    mon.on_tp_commit({TP(TOPIC, 1): 5})
    mon.on_commit_completed(None, state)
    assert value("memstream_commit_seconds_count") == count + 1


def test_rebalances_are_counted_and_tracked() -> None:
    mon, tracker = monitor()
    count = value("memstream_rebalances_total")
    app: Any = FakeApp()
    state = mon.on_rebalance_start(app)
    assert value("memstream_rebalances_total") == count + 1
    assert tracker.rebalancing_since is not None
    mon.on_rebalance_return(app, state)
    mon.on_rebalance_end(app, state)
    assert tracker.rebalancing_since is None and tracker.assignments == 1


def test_faust_per_record_series_are_not_kept_and_commits_still_are() -> None:
    registry = CollectorRegistry()
    mon = KafkaMonitor(ProgressTracker(started_at=0.0),
                       metrics=FaustMetrics.create(registry, "t"))

    class Message:
        topic, partition, offset, key, value = TOPIC, 0, 5, b"k", b"v"

    tp = TP(TOPIC, 0)
    mon.on_message_in(tp, 5, Message())
    state = mon.on_stream_event_in(tp, 5, object(), object())
    mon.on_stream_event_out(tp, 5, object(), object(), state)
    mon.on_message_out(tp, 5, Message())
    mon.on_send_completed(object(), mon.on_send_initiated(object(), TOPIC, Message(), 1, 1),
                          object())
    mon.track_tp_end_offset(tp, 9)
    assert mon.tp_end_offsets[tp] == 9  # kept for Faust, no gauge
    per_record = [s for m in registry.collect() for s in m.samples
                  if s.name.startswith(("t_messages", "t_events", "t_topic", "t_total_sent",
                                        "t_table", "t_end_offset", "t_producer_send"))
                  and not s.name.endswith("_created") and s.value]
    assert per_record == []
    mon.on_commit_completed(object(), mon.on_commit_initiated(object()))
    assert registry.get_sample_value("t_consumer_commit_latency_count") == 1.0
