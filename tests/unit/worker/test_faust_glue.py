"""The worker's logging (Faust's terminal spinner must not lower the root level) and
which topics the commit guard's recovery takes as finished out of order."""

from __future__ import annotations

import logging

import pytest
from faust.utils.terminal import Spinner
from mode.timers import Timer

from streams.settings import Settings
from streams.worker.commit_guard import CommitGuard
from streams.worker.faust_glue import (
    QuietWorker,
    _Recovery,
    install_commit_guard,
    out_of_order_topics,
    timer,
)


def test_the_root_logger_keeps_its_level_at_warn_and_above() -> None:
    root = logging.Logger("root-under-test", logging.WARNING)
    root.addHandler(logging.StreamHandler())
    worker = object.__new__(QuietWorker)
    worker.spinner = Spinner()
    worker.on_setup_root_logger(root, logging.WARNING)
    assert root.level == logging.WARNING and not root.isEnabledFor(logging.DEBUG)
    assert len(root.handlers) == 1 and worker.spinner is None


def test_consolidation_finishing_out_of_order_is_not_taken_for_a_record_passed_over() -> None:
    """Session ends are acknowledged as each is handled, a short one before a long
    one read earlier: the long one runs, it was not passed over (no rebalance)."""
    kafka = Settings().kafka
    guard = CommitGuard()
    recovery = _Recovery(guard, frozenset(out_of_order_topics(kafka)), after_s=60.0)
    for topic in (kafka.session_closed_topic, kafka.retry_topic, kafka.chat_topic):
        guard.received((topic, 0), [0, 1])
        guard.finished((topic, 0), 1)
    recovery.check(consumer=None)
    # only the in-order topic's record counts as passed over
    assert set(recovery.since) == {(kafka.chat_topic, 0)}


def test_a_commit_held_below_acknowledged_records_moves_past_them_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A long run at offset 0, short ones at 1-3 acknowledged first: the guard holds
    the commit at 0; once 0 is finished the commit goes past 3, not to 1 only (Faust
    forgets acknowledgements as it computes the commit)."""
    from collections import defaultdict
    from types import MethodType, SimpleNamespace

    from faust.transport.consumer import Consumer
    from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread
    from faust.types import TP
    from intervaltree import IntervalTree

    for cls, name in ((Consumer, "_filter_committable_offsets"),
                      (Consumer, "on_partitions_revoked"), (Consumer, "on_partitions_assigned"),
                      (AIOKafkaConsumerThread, "_fetch_records")):
        monkeypatch.setattr(cls, name, getattr(cls, name))  # restored after the test
    guard = CommitGuard()
    install_commit_guard(guard, out_of_order_topics=["closed"])
    tp = TP("closed", 0)
    fake = SimpleNamespace(_acked=defaultdict(list), _acked_index=defaultdict(set),
                           _committed_offset=defaultdict(lambda: None),
                           _gap=defaultdict(IntervalTree))
    fake._new_offset = MethodType(Consumer._new_offset, fake)
    fake._should_commit = MethodType(Consumer._should_commit, fake)
    fake._filter_tps_with_pending_acks = MethodType(Consumer._filter_tps_with_pending_acks, fake)

    def ack(offset: int) -> None:
        guard.finished(("closed", 0), offset)
        fake._acked[tp].append(offset)
        fake._acked_index[tp].add(offset)

    def commit() -> int | None:
        offsets = Consumer._filter_committable_offsets(fake, [tp])
        fake._committed_offset.update(offsets)
        return offsets.get(tp)

    guard.received(("closed", 0), [0, 1, 2, 3])
    for offset in (1, 2, 3):
        ack(offset)
    assert commit() in (None, 0)  # held at the long run
    ack(0)
    assert commit() == 4


class _TimerApp:
    def __init__(self) -> None:
        self.asked: dict[str, object] = {}

    def timer(self, interval_s: float, **kw: object) -> object:
        self.asked = {"interval_s": interval_s, **kw}
        return lambda fn: fn


@pytest.mark.parametrize(("interval_s", "steady", "corrected"), [
    (0.1, True, False), (0.2, True, False), (5.0, True, False),
    (0.2, False, True), (5.0, False, True),
])
def test_a_steady_timer_sleeps_its_interval_every_time(interval_s: float, steady: bool,
                                                        corrected: bool) -> None:
    app = _TimerApp()
    timer(app, interval_s, name="t", steady=steady)
    drift = app.asked["max_drift_correction"]
    assert isinstance(drift, float)
    mode_timer = Timer(interval_s, max_drift_correction=drift)
    assert (mode_timer.min_interval_s < mode_timer.max_interval_s) is corrected
