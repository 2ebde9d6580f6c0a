"""Health decisions and consumer progress per stage, on a fake clock."""

from __future__ import annotations

import pytest

from streams.adapters.kafka.progress import ProgressTracker, partition_lag
from streams.worker.health import GroupState, KafkaState, liveness, readiness, stage_verdicts

EXEMPT = frozenset({"memory.retry"})
STAGES = {"chat": "ingest", "idle": "ingest", "closed": "consolidation"}
STALL, MAX_REBALANCE = 30.0, 600.0


def tracker(now: float = 0.0, stages: dict[str, str] | None = None,
            assign: bool = True) -> ProgressTracker:
    t = ProgressTracker(started_at=now, stage_of=STAGES if stages is None else stages,
                        exempt=EXEMPT)
    if assign:
        t.on_rebalance_start(now)
        t.on_rebalance_end(now)
    return t


def query_tracker(now: float = 0.0, assign: bool = True) -> ProgressTracker:
    return tracker(now, {"queries": "query"}, assign=assign)


def state(faust: ProgressTracker, now: float, *, query: ProgressTracker | None = None,
          rebalancing: bool = False, query_rebalancing: bool = False, started: bool = True,
          query_started: bool = True, **kw: object) -> KafkaState:
    args: dict[str, object] = dict(now=now, recovering=False, coordinator_known=True, assigned=4)
    args.update(kw)
    return KafkaState(
        faust=GroupState("faust", started, rebalancing, faust),
        query=None if query is None else GroupState("query", query_started, query_rebalancing,
                                                    query, (0, 2)),
        **args,  # type: ignore[arg-type]
    )


def test_partition_lag() -> None:
    assert partition_lag(None, 5, 0) is None  # end offset unknown
    assert partition_lag(100, 40, 0) == 60
    assert partition_lag(100, None, 30) == 70  # nothing committed: from the log start
    assert partition_lag(100, None, None) == 100
    assert partition_lag(100, 120, 0) == 0


def test_commits_advance_the_progress_of_their_stage_only_forward() -> None:
    t = tracker(10.0)
    assert t.last_progress_at == 10.0
    assert t.on_commit({("chat", 0): 5}, 11.0) == {"ingest"}
    assert t.on_commit({("chat", 0): 5}, 12.0) == set()
    assert t.on_commit({("chat", 0): 3}, 13.0) == set()
    assert t.stages["ingest"].progress_at == 11.0
    assert t.stages["consolidation"].progress_at == 10.0
    assert t.on_commit({("closed", 1): 1, ("idle", 0): 2}, 14.0) == {"consolidation", "ingest"}
    assert t.on_commit({("memory.retry", 0): 9}, 15.0) == set()  # exempt: no stage
    assert t.last_progress_at == 14.0
    t.forget([("chat", 0)])
    assert t.on_commit({("chat", 0): 5}, 16.0) == {"ingest"}  # owned again after a rebalance


def test_a_topic_of_no_stage_is_a_stage_of_its_own() -> None:
    t = tracker(0.0)
    t.on_lag({("other", 0): 3}, 1.0)
    assert t.stage_lag("other") == 3 and t.stages["other"].lag_since == 1.0


@pytest.mark.parametrize(
    ("case", "lag", "commits", "now", "expected"),
    [
        # stage -> (lag, stalled_for_s)
        ("all idle", {}, {}, 100.0,
         {"ingest": (0, 0.0), "consolidation": (0, 0.0)}),
        ("ingest lags, nothing moves", {("chat", 0): 5}, {}, 100.0,
         {"ingest": (5, 99.0), "consolidation": (0, 0.0)}),
        ("ingest lags and commits: its clock restarts", {("chat", 0): 5}, {("chat", 0): 9}, 100.0,
         {"ingest": (5, 50.0), "consolidation": (0, 0.0)}),
        ("consolidation stalls while ingest commits", {("closed", 0): 2, ("chat", 0): 1},
         {("chat", 0): 9}, 100.0, {"ingest": (1, 50.0), "consolidation": (2, 99.0)}),
        ("retry lag belongs to no stage", {("memory.retry", 0): 7}, {}, 100.0,
         {"ingest": (0, 0.0), "consolidation": (0, 0.0)}),
    ],
)
def test_stage_verdicts(case: str, lag: dict[tuple[str, int], int],
                        commits: dict[tuple[str, int], int], now: float,
                        expected: dict[str, tuple[int, float]]) -> None:
    t = tracker(0.0)
    t.on_lag(lag, 1.0)
    if commits:
        t.on_commit(commits, 50.0)
    verdicts = stage_verdicts(GroupState("faust", True, False, t), now)
    assert {v.stage: (v.lag, v.stalled_for_s) for v in verdicts} == expected, case


def test_a_rebalancing_group_has_no_stalled_stage() -> None:
    t = tracker(0.0)
    t.on_lag({("chat", 0): 5}, 1.0)
    t.on_rebalance_start(50.0)
    assert [v.stalled_for_s for v in stage_verdicts(GroupState("faust", True, True, t), 99.0)
            ] == [0.0, 0.0]


def test_ready_only_after_assignment_and_recovery_and_with_a_coordinator() -> None:
    fresh = tracker(assign=False)
    assert readiness(state(fresh, 1.0, started=False)).status == 503
    v = readiness(state(fresh, 1.0))
    assert v.status == 503 and "first partition assignment" in v.body["reason"]
    t = tracker()
    v = readiness(state(t, 1.0))
    assert v.status == 200 and v.body["status"] == "ready" and v.body["assigned_partitions"] == 4
    assert "rebalance" in readiness(state(t, 1.0, rebalancing=True)).body["reason"]
    assert "recovery" in readiness(state(t, 1.0, recovering=True)).body["reason"]
    v = readiness(state(t, 1.0, coordinator_known=False))
    assert v.status == 503 and "coordinator" in v.body["reason"]
    assert readiness(state(t, 1.0, coordinator_known=None)).status == 200  # cannot tell


def test_ready_needs_the_query_consumer_assigned_but_not_idle_of_rebalances() -> None:
    t = tracker()
    v = readiness(state(t, 1.0, query=query_tracker(), query_started=False))
    assert v.status == 503 and "query consumer is not running" in v.body["reason"]
    v = readiness(state(t, 1.0, query=query_tracker(assign=False)))
    assert v.status == 503 and "query consumer's first partition assignment" in v.body["reason"]
    v = readiness(state(t, 1.0, query=query_tracker(), query_rebalancing=True))
    assert v.status == 200
    assert v.body["query"] == {"started": True, "assignments_completed": 1, "partitions": [0, 2]}


def test_live_while_lag_is_worked_off() -> None:
    t = tracker()
    t.on_lag({("chat", 0): 50, ("chat", 1): None}, 1.0)
    v = liveness(state(t, 20.0), STALL, MAX_REBALANCE)
    assert v.status == 200 and v.body["lag"] == 50 and v.body["stalled_for_s"] == 19.0
    assert v.body["partitions_without_end_offset"] == 1
    assert v.body["stages"]["ingest"] == {"lag": 50, "stalled_for_s": 19.0,
                                          "seconds_since_progress": 20.0}
    t.on_commit({("chat", 0): 10}, 25.0)
    assert liveness(state(t, 50.0), STALL, MAX_REBALANCE).status == 200


def test_stuck_when_lag_and_no_progress() -> None:
    t = tracker()
    t.on_lag({("chat", 0): 50}, 1.0)
    v = liveness(state(t, 31.5), STALL, MAX_REBALANCE)
    assert v.status == 503 and v.body["status"] == "stuck"
    assert "50 messages wait in the ingest stage" in v.body["reason"]
    assert v.body["stalled_stages"] == ["ingest"]
    assert v.body["lagging_partitions"] == [{"topic": "chat", "partition": 0, "lag": 50}]
    t.on_commit({("chat", 0): 60}, 32.0)
    t.on_lag({("chat", 0): 0}, 32.5)
    assert liveness(state(t, 100.0), STALL, MAX_REBALANCE).status == 200


def test_a_stuck_query_stage_is_not_hidden_by_ingest_progress() -> None:
    faust, query = tracker(), query_tracker()
    query.on_lag({("queries", 1): 68}, 1.0)
    faust.on_lag({("chat", 0): 10}, 1.0)
    for now in (10.0, 20.0, 30.0, 40.0):  # ingest commits all the time
        faust.on_commit({("chat", 0): int(now)}, now)
    v = liveness(state(faust, 40.0, query=query), STALL, MAX_REBALANCE)
    assert v.status == 503 and v.body["stalled_stages"] == ["query"]
    assert "68 messages wait in the query stage" in v.body["reason"]
    assert v.body["stages"]["ingest"]["stalled_for_s"] == 0.0
    assert v.body["lag"] == 78


def test_a_stuck_ingest_stage_is_not_hidden_by_query_progress() -> None:
    faust, query = tracker(), query_tracker()
    faust.on_lag({("chat", 0): 20}, 1.0)
    query.on_lag({("queries", 0): 2}, 1.0)
    for now in (10.0, 20.0, 30.0, 40.0):
        query.on_commit({("queries", 0): int(now)}, now)
    v = liveness(state(faust, 40.0, query=query), STALL, MAX_REBALANCE)
    assert v.status == 503 and v.body["stalled_stages"] == ["ingest"]
    assert "in the ingest stage" in v.body["reason"] and "query" not in v.body["reason"]


def test_a_burst_after_a_quiet_hour_is_not_a_stall() -> None:
    t = tracker()
    t.on_lag({("chat", 0): 0}, 1.0)
    t.on_lag({("chat", 0): 500}, 3600.0)  # last progress: an hour ago
    assert liveness(state(t, 3605.0), STALL, MAX_REBALANCE).status == 200
    assert liveness(state(t, 3631.0), STALL, MAX_REBALANCE).status == 503


def test_held_retry_events_are_no_stall() -> None:
    t = tracker()
    t.on_lag({("memory.retry", 0): 3, ("chat", 0): 0}, 1.0)
    v = liveness(state(t, 1000.0), STALL, MAX_REBALANCE)
    assert v.status == 200 and v.body["lag"] == 0
    assert v.body["lagging_partitions"] == [{"topic": "memory.retry", "partition": 0, "lag": 3}]
    assert v.body["lag_exempt_topics"] == ["memory.retry"]


def test_rebalances_reset_the_stall_clock_and_may_not_last_forever() -> None:
    t = tracker()
    t.on_lag({("chat", 0): 50}, 1.0)
    t.on_rebalance_start(20.0)
    assert liveness(state(t, 100.0, rebalancing=True), STALL, MAX_REBALANCE).status == 200
    v = liveness(state(t, 700.0, rebalancing=True), STALL, MAX_REBALANCE)
    assert v.status == 503 and "a rebalance has lasted 680s" in v.body["reason"]
    t.on_rebalance_end(701.0)
    assert t.assignments == 2
    assert liveness(state(t, 720.0), STALL, MAX_REBALANCE).status == 200
    assert liveness(state(t, 732.0), STALL, MAX_REBALANCE).status == 503


def test_the_query_group_rebalances_on_its_own_clock() -> None:
    faust, query = tracker(), query_tracker()
    query.on_lag({("queries", 0): 5}, 1.0)
    query.on_rebalance_start(10.0)
    v = liveness(state(faust, 35.0, query=query, query_rebalancing=True), STALL, MAX_REBALANCE)
    assert v.status == 200 and v.body["rebalancing_for_s"] is None
    v = liveness(state(faust, 700.0, query=query, query_rebalancing=True), STALL, MAX_REBALANCE)
    assert v.status == 503 and "rebalance of the query consumer has lasted 690s" in v.body["reason"]
    query.on_rebalance_end(701.0)
    assert liveness(state(faust, 720.0, query=query), STALL, MAX_REBALANCE).status == 200
    assert liveness(state(faust, 732.0, query=query), STALL, MAX_REBALANCE).status == 503


def test_the_erasure_queue_is_a_stage_of_the_worker_judged_on_its_own() -> None:
    """Issue 41: an erasure stuck on its single-partition queue makes the worker not
    live, named as the ``erasure`` stage, while ingest flows; an erasure acknowledges
    its request at the end of each turn (at most half the stall timeout), so a long
    one that is working is never taken for stuck."""
    from streams.settings import Settings
    from streams.worker.web import faust_stages

    settings = Settings()
    stages = faust_stages(settings)
    assert stages[settings.kafka.erasures_topic] == "erasure"
    assert settings.erasure.turn_s <= settings.health.stall_timeout_s / 2

    t = tracker(stages=stages)
    erasures, chat = settings.kafka.erasures_topic, settings.kafka.chat_topic
    t.on_lag({(erasures, 0): 3, (chat, 0): 10}, 1.0)
    for now in (10.0, 20.0, 30.0):  # ingest commits all the time
        t.on_commit({(chat, 0): int(now)}, now)
    t.on_commit({(erasures, 0): 1}, 15.0)  # a turn ended: requeued, acknowledged
    assert liveness(state(t, 15.0 + STALL - 1), STALL, MAX_REBALANCE).status == 200
    v = liveness(state(t, 15.0 + STALL + 1), STALL, MAX_REBALANCE)
    assert v.status == 503 and v.body["stalled_stages"] == ["erasure"]
    assert "in the erasure stage" in v.body["reason"]


@pytest.mark.parametrize(("down_s", "ready", "live"), [
    (None, True, True),  # no query process, or one answering
    (0.0, False, True),  # starting
    (STALL, False, True),  # down, not yet past the limit
    (STALL + 1, False, False),  # down past it: the pod is restarted
])
def test_a_query_process_not_answering(down_s: float | None, ready: bool, live: bool) -> None:
    s = state(tracker(), 100.0, query_process_down_s=down_s)
    r, v = readiness(s), liveness(s, STALL, MAX_REBALANCE)
    assert (r.status == 200, v.status == 200) == (ready, live)
    if not ready:
        assert "query process" in r.body["reason"]
    if not live:
        assert "query process has not answered" in v.body["reason"]
