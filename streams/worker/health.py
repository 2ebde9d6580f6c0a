"""``/health/live`` and ``/health/ready`` on the worker's web port.

Ready (200) when the worker can do its share of the work: Faust's consumer
runs, a partition assignment has completed, no rebalance (and so no table
recovery) is in progress, the group coordinator answers, and the query
consumer runs and has had its first assignment. Otherwise 503: rolling
updates, the PodDisruptionBudget and load balancers wait for it.

Live (200) unless a stage is stuck: one of ingest, consolidation, erasure or
query (:mod:`streams.adapters.kafka.progress`) has lag on its partitions and none
of its committed offsets has advanced for ``MEMSTREAM_HEALTH__STALL_TIMEOUT_S``,
whatever the other stages do (an erasure acknowledges its request at the end of
every turn, done or requeued, well within that time) — the failure Faust users
report after broker outages (faust #523) and rebalances (#629), where the
process runs but nothing moves — or one
rebalance of either consumer group has lasted longer than
``MEMSTREAM_HEALTH__MAX_REBALANCE_S``. Then 503, naming the stage, and an
orchestrator restarts the worker; the new consumers resume from the committed
offsets. A stage's stall clock starts at the latest of: its last progress, the
moment its lag appeared, the end of its consumer's last rebalance — so a burst
arriving after a quiet hour is not a stall. Lag of the retry topic is not
counted: events there wait, unacknowledged, until they are due.

Both answer JSON: ``status``, a ``reason`` when failing, and the figures the
decision was made on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from streams.adapters.kafka.progress import ProgressTracker
from streams.worker.kafka_monitor import ConsumerProbe


@dataclass(frozen=True)
class GroupState:
    """One consumer group membership of the worker, at one moment."""

    name: str  # "faust" (ingest, consolidation) or "query"
    started: bool
    rebalancing: bool
    tracker: ProgressTracker
    partitions: tuple[int, ...] = ()


@dataclass(frozen=True)
class KafkaState:
    """What the health checks decide on, at one moment (monotonic seconds)."""

    now: float
    faust: GroupState
    recovering: bool
    coordinator_known: bool | None
    assigned: int
    query: GroupState | None = None
    # with a query process (query.process own): how long it has not been answering
    # (not running, or without its partitions yet); None: it is, or there is none
    query_process_down_s: float | None = None

    @property
    def groups(self) -> tuple[GroupState, ...]:
        return (self.faust,) if self.query is None else (self.faust, self.query)


@dataclass(frozen=True)
class StageVerdict:
    stage: str
    lag: int
    stalled_for_s: float
    seconds_since_progress: float


@dataclass(frozen=True)
class Verdict:
    ok: bool
    body: dict[str, Any]

    @property
    def status(self) -> int:
        return 200 if self.ok else 503


def _ago(now: float, then: float | None) -> float | None:
    return round(now - then, 3) if then is not None else None


def stage_verdicts(group: GroupState, now: float) -> list[StageVerdict]:
    """How long each stage of ``group`` has had lag without progress (0: not stalled)."""
    t = group.tracker
    out = []
    for stage, progress in sorted(t.stages.items()):
        lag = t.stage_lag(stage)
        since = [x for x in (progress.progress_at, progress.lag_since, t.last_assignment_at)
                 if x is not None]
        stalled = round(now - max(since), 3) if lag > 0 and not group.rebalancing else 0.0
        out.append(StageVerdict(stage, lag, stalled, round(now - progress.progress_at, 3)))
    return out


def readiness(s: KafkaState) -> Verdict:
    t = s.faust.tracker
    details: dict[str, Any] = {
        "assigned_partitions": s.assigned,
        "assignments_completed": t.assignments,
        "rebalancing": s.faust.rebalancing,
        "recovering": s.recovering,
        "coordinator_known": s.coordinator_known,
    }
    if s.query is not None:
        details["query"] = {"started": s.query.started,
                            "assignments_completed": s.query.tracker.assignments,
                            "partitions": list(s.query.partitions)}
    reason = None
    if not s.faust.started:
        reason = "starting: the consumer is not running yet"
    elif t.assignments == 0:
        reason = "waiting for the first partition assignment"
    elif s.faust.rebalancing:
        reason = "rebalance in progress (partitions are being assigned or tables recovered)"
    elif s.recovering:
        reason = "table recovery in progress"
    elif s.coordinator_known is False:
        reason = "the consumer group coordinator cannot be reached (is Kafka down?)"
    elif s.query is not None and not s.query.started:
        reason = "starting: the query consumer is not running yet"
    elif s.query is not None and s.query.tracker.assignments == 0:
        reason = "waiting for the query consumer's first partition assignment"
    elif s.query_process_down_s is not None:
        reason = "waiting for the query process (not running, or without its partitions)"
    if reason is None:
        return Verdict(True, {"status": "ready", **details})
    return Verdict(False, {"status": "not_ready", "reason": reason, **details})


def liveness(s: KafkaState, stall_timeout_s: float, max_rebalance_s: float) -> Verdict:
    now = s.now
    verdicts = [v for g in s.groups for v in stage_verdicts(g, now)]
    stalled = [v for v in verdicts if v.stalled_for_s > stall_timeout_s]
    lag = {tp: n for g in s.groups for tp, n in g.tracker.lag.items()}
    lagging = sorted(((tp, n) for tp, n in lag.items() if n > 0), key=lambda x: -x[1])
    rebalancing_for = {g.name: _ago(now, g.tracker.rebalancing_since)
                       for g in s.groups if g.rebalancing}
    details: dict[str, Any] = {
        "lag": sum(g.tracker.stall_lag() for g in s.groups),
        "lag_exempt_topics": sorted({t for g in s.groups for t in g.tracker.exempt}),
        "lagging_partitions": [{"topic": tp[0], "partition": tp[1], "lag": n}
                               for tp, n in lagging[:20]],
        "partitions_without_end_offset": sum(len(g.tracker.unknown) for g in s.groups),
        "seconds_since_progress": min((v.seconds_since_progress for v in verdicts), default=None),
        "stalled_for_s": max((v.stalled_for_s for v in verdicts), default=0.0),
        "stall_timeout_s": stall_timeout_s,
        "rebalancing_for_s": rebalancing_for.get("faust"),
        "stages": {v.stage: {"lag": v.lag, "stalled_for_s": v.stalled_for_s,
                             "seconds_since_progress": v.seconds_since_progress}
                   for v in verdicts},
        "stalled_stages": [v.stage for v in stalled],
    }
    too_long = [(name, d) for name, d in rebalancing_for.items()
                if d is not None and d > max_rebalance_s]
    reason = None
    if too_long:
        name, d = too_long[0]
        which = "a rebalance" if name == "faust" else f"a rebalance of the {name} consumer"
        reason = f"{which} has lasted {d:.0f}s (limit {max_rebalance_s:.0f}s)"
    elif stalled:
        reason = "stuck: " + "; ".join(
            f"{v.lag} messages wait in the {v.stage} stage and no committed offset of it "
            f"advanced for {v.stalled_for_s:.0f}s (limit {stall_timeout_s:.0f}s)"
            for v in stalled)
    elif s.query_process_down_s is not None and s.query_process_down_s > stall_timeout_s:
        reason = (f"the query process has not answered for {s.query_process_down_s:.0f}s "
                  f"(not running, or without its partitions; limit {stall_timeout_s:.0f}s)")
    if reason is None:
        return Verdict(True, {"status": "live", **details})
    return Verdict(False, {"status": "stuck", "reason": reason, **details})


class QueryGroupProbe(Protocol):
    """What the health checks read of the query consumer."""

    tracker: ProgressTracker

    def started(self) -> bool: ...

    def partitions(self) -> list[int]: ...


class HealthChecks:
    """Builds :class:`KafkaState` from the running app and answers both checks."""

    def __init__(self, app: Any, probe: ConsumerProbe, tracker: ProgressTracker, *,
                 query: QueryGroupProbe | None, stall_timeout_s: float,
                 max_rebalance_s: float,
                 query_process_down: Callable[[float], float | None] | None = None) -> None:
        self.app = app
        self.probe = probe
        self.tracker = tracker
        self.query = query
        self.stall_timeout_s = stall_timeout_s
        self.max_rebalance_s = max_rebalance_s
        self.query_process_down = query_process_down

    def state(self) -> KafkaState:
        q, now = self.query, time.monotonic()
        down = self.query_process_down
        return KafkaState(
            now=now,
            query_process_down_s=None if down is None else down(now),
            faust=GroupState("faust", self.probe.started(),
                             bool(getattr(self.app, "rebalancing", False)), self.tracker),
            recovering=bool(getattr(self.app, "in_recovery", False)),
            coordinator_known=self.probe.coordinator_known(),
            assigned=len(self.probe.assigned()),
            query=None if q is None else GroupState(
                "query", q.started(), q.tracker.rebalancing_since is not None, q.tracker,
                tuple(q.partitions())),
        )

    def ready(self) -> Verdict:
        return readiness(self.state())

    def live(self) -> Verdict:
        return liveness(self.state(), self.stall_timeout_s, self.max_rebalance_s)


def install_health(app: Any, checks: HealthChecks) -> None:
    """Register both checks on ``app``'s web server."""

    async def health_live(self: Any, request: Any) -> Any:
        verdict = checks.live()
        return self.json(verdict.body, status=verdict.status)

    async def health_ready(self: Any, request: Any) -> Any:
        verdict = checks.ready()
        return self.json(verdict.body, status=verdict.status)

    app.page("/health/live", name="health_live")(health_live)
    app.page("/health/ready", name="health_ready")(health_ready)
