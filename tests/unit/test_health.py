"""Health decisions and consumer progress, on a fake clock."""

from __future__ import annotations

from streams.health import KafkaState, liveness, readiness
from streams.kafka_metrics import ProgressTracker, partition_lag

EXEMPT = frozenset({"memory.retry"})
STALL, MAX_REBALANCE = 30.0, 600.0


def state(tracker: ProgressTracker, now: float, **kw: object) -> KafkaState:
    args: dict[str, object] = dict(now=now, started=True, rebalancing=False, recovering=False,
                                   coordinator_known=True, assigned=4, tracker=tracker,
                                   exempt=EXEMPT)
    args.update(kw)
    return KafkaState(**args)  # type: ignore[arg-type]


def assigned(now: float = 0.0) -> ProgressTracker:
    t = ProgressTracker(started_at=now)
    t.on_rebalance_start(now)
    t.on_rebalance_end(now)
    return t


def test_partition_lag() -> None:
    assert partition_lag(None, 5, 0) is None  # end offset unknown
    assert partition_lag(100, 40, 0) == 60
    assert partition_lag(100, None, 30) == 70  # nothing committed: from the log start
    assert partition_lag(100, None, None) == 100
    assert partition_lag(100, 120, 0) == 0


def test_commits_advance_progress_only_forward() -> None:
    t = ProgressTracker(started_at=10.0)
    assert t.last_progress_at == 10.0
    assert t.on_commit({("chat", 0): 5}, 11.0)
    assert not t.on_commit({("chat", 0): 5}, 12.0)
    assert not t.on_commit({("chat", 0): 3}, 13.0)
    assert t.last_progress_at == 11.0
    assert t.on_commit({("chat", 0): 5, ("chat", 1): 1}, 14.0)
    t.forget([("chat", 0)])
    assert t.on_commit({("chat", 0): 5}, 15.0)  # owned again after a rebalance


def test_ready_only_after_assignment_and_recovery_and_with_a_coordinator() -> None:
    fresh = ProgressTracker(started_at=0.0)
    assert readiness(state(fresh, 1.0, started=False)).status == 503
    v = readiness(state(fresh, 1.0))
    assert v.status == 503 and "first partition assignment" in v.body["reason"]
    t = assigned()
    v = readiness(state(t, 1.0))
    assert v.status == 200 and v.body["status"] == "ready" and v.body["assigned_partitions"] == 4
    assert "rebalance" in readiness(state(t, 1.0, rebalancing=True)).body["reason"]
    assert "recovery" in readiness(state(t, 1.0, recovering=True)).body["reason"]
    v = readiness(state(t, 1.0, coordinator_known=False))
    assert v.status == 503 and "coordinator" in v.body["reason"]
    assert readiness(state(t, 1.0, coordinator_known=None)).status == 200  # cannot tell


def test_live_while_lag_is_worked_off() -> None:
    t = assigned()
    t.on_lag({("chat", 0): 50, ("chat", 1): None}, EXEMPT, 1.0)
    v = liveness(state(t, 20.0), STALL, MAX_REBALANCE)
    assert v.status == 200 and v.body["lag"] == 50 and v.body["stalled_for_s"] == 19.0
    assert v.body["partitions_without_end_offset"] == 1
    t.on_commit({("chat", 0): 10}, 25.0)
    assert liveness(state(t, 50.0), STALL, MAX_REBALANCE).status == 200


def test_stuck_when_lag_and_no_progress() -> None:
    t = assigned()
    t.on_lag({("chat", 0): 50}, EXEMPT, 1.0)
    v = liveness(state(t, 31.5), STALL, MAX_REBALANCE)
    assert v.status == 503 and v.body["status"] == "stuck"
    assert "50 messages wait" in v.body["reason"]
    assert v.body["lagging_partitions"] == [{"topic": "chat", "partition": 0, "lag": 50}]
    t.on_commit({("chat", 0): 60}, 32.0)
    t.on_lag({("chat", 0): 0}, EXEMPT, 32.5)
    assert liveness(state(t, 100.0), STALL, MAX_REBALANCE).status == 200


def test_a_burst_after_a_quiet_hour_is_not_a_stall() -> None:
    t = assigned()
    t.on_lag({("chat", 0): 0}, EXEMPT, 1.0)
    t.on_lag({("chat", 0): 500}, EXEMPT, 3600.0)  # last progress: an hour ago
    assert liveness(state(t, 3605.0), STALL, MAX_REBALANCE).status == 200
    assert liveness(state(t, 3631.0), STALL, MAX_REBALANCE).status == 503


def test_held_retry_events_are_no_stall() -> None:
    t = assigned()
    t.on_lag({("memory.retry", 0): 3, ("chat", 0): 0}, EXEMPT, 1.0)
    v = liveness(state(t, 1000.0), STALL, MAX_REBALANCE)
    assert v.status == 200 and v.body["lag"] == 0
    assert v.body["lagging_partitions"] == [{"topic": "memory.retry", "partition": 0, "lag": 3}]


def test_rebalances_reset_the_stall_clock_and_may_not_last_forever() -> None:
    t = assigned()
    t.on_lag({("chat", 0): 50}, EXEMPT, 1.0)
    t.on_rebalance_start(20.0)
    assert liveness(state(t, 100.0, rebalancing=True), STALL, MAX_REBALANCE).status == 200
    v = liveness(state(t, 700.0, rebalancing=True), STALL, MAX_REBALANCE)
    assert v.status == 503 and "rebalance has lasted 680s" in v.body["reason"]
    t.on_rebalance_end(701.0)
    assert t.assignments == 2
    assert liveness(state(t, 720.0), STALL, MAX_REBALANCE).status == 200
    assert liveness(state(t, 732.0), STALL, MAX_REBALANCE).status == 503
