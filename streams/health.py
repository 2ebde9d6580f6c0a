"""``/health/live`` and ``/health/ready`` on the worker's web port.

Ready (200) when the worker can do its share of the work: its consumer runs,
a partition assignment has completed, no rebalance (and so no table recovery)
is in progress, and the group coordinator answers. Otherwise 503: rolling
updates, the PodDisruptionBudget and load balancers wait for it.

Live (200) unless the consumer is stuck: it has lag on its partitions and no
committed offset has advanced for ``MEMSTREAM_HEALTH__STALL_TIMEOUT_S`` —
the failure Faust users report after broker outages (faust #523) and
rebalances (#629), where the process runs but nothing moves — or one
rebalance has lasted longer than ``MEMSTREAM_HEALTH__MAX_REBALANCE_S``. Then
503, and an orchestrator restarts the worker; the new consumer resumes from the
committed offsets. The stall clock starts at the latest of: the last progress,
the moment lag appeared, the end of the last rebalance — so a burst arriving
after a quiet hour is not a stall. Lag of the retry topic is not counted:
events there wait, unacknowledged, until they are due.

Both answer JSON: ``status``, a ``reason`` when failing, and the figures the
decision was made on.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from streams.kafka_metrics import ConsumerProbe, ProgressTracker


@dataclass(frozen=True)
class KafkaState:
    """What the health checks decide on, at one moment (monotonic seconds)."""

    now: float
    started: bool
    rebalancing: bool
    recovering: bool
    coordinator_known: bool | None
    assigned: int
    tracker: ProgressTracker
    exempt: frozenset[str]


@dataclass(frozen=True)
class Verdict:
    ok: bool
    body: dict[str, Any]

    @property
    def status(self) -> int:
        return 200 if self.ok else 503


def _ago(now: float, then: float | None) -> float | None:
    return round(now - then, 3) if then is not None else None


def readiness(s: KafkaState) -> Verdict:
    t = s.tracker
    details: dict[str, Any] = {
        "assigned_partitions": s.assigned,
        "assignments_completed": t.assignments,
        "rebalancing": s.rebalancing,
        "recovering": s.recovering,
        "coordinator_known": s.coordinator_known,
    }
    reason = None
    if not s.started:
        reason = "starting: the consumer is not running yet"
    elif t.assignments == 0:
        reason = "waiting for the first partition assignment"
    elif s.rebalancing:
        reason = "rebalance in progress (partitions are being assigned or tables recovered)"
    elif s.recovering:
        reason = "table recovery in progress"
    elif s.coordinator_known is False:
        reason = "the consumer group coordinator cannot be reached (is Kafka down?)"
    if reason is None:
        return Verdict(True, {"status": "ready", **details})
    return Verdict(False, {"status": "not_ready", "reason": reason, **details})


def liveness(s: KafkaState, stall_timeout_s: float, max_rebalance_s: float) -> Verdict:
    t, now = s.tracker, s.now
    lag = t.stall_lag(s.exempt)
    since = [x for x in (t.last_progress_at, t.lag_since, t.last_assignment_at) if x is not None]
    stalled_for = round(now - max(since), 3) if lag > 0 and not s.rebalancing else 0.0
    rebalancing_for = _ago(now, t.rebalancing_since) if s.rebalancing else None
    lagging = sorted(((tp, n) for tp, n in t.lag.items() if n > 0), key=lambda x: -x[1])
    details: dict[str, Any] = {
        "lag": lag,
        "lag_exempt_topics": sorted(s.exempt),
        "lagging_partitions": [{"topic": tp[0], "partition": tp[1], "lag": n}
                               for tp, n in lagging[:20]],
        "partitions_without_end_offset": len(t.unknown),
        "seconds_since_progress": _ago(now, t.last_progress_at),
        "stalled_for_s": stalled_for,
        "stall_timeout_s": stall_timeout_s,
        "rebalancing_for_s": rebalancing_for,
    }
    reason = None
    if rebalancing_for is not None and rebalancing_for > max_rebalance_s:
        reason = f"a rebalance has lasted {rebalancing_for:.0f}s (limit {max_rebalance_s:.0f}s)"
    elif lag > 0 and stalled_for > stall_timeout_s:
        reason = (f"stuck: {lag} messages wait and no committed offset advanced for "
                  f"{stalled_for:.0f}s (limit {stall_timeout_s:.0f}s)")
    if reason is None:
        return Verdict(True, {"status": "live", **details})
    return Verdict(False, {"status": "stuck", "reason": reason, **details})


class HealthChecks:
    """Builds :class:`KafkaState` from the running app and answers both checks."""

    def __init__(self, app: Any, probe: ConsumerProbe, tracker: ProgressTracker, *,
                 exempt: frozenset[str], stall_timeout_s: float, max_rebalance_s: float) -> None:
        self.app = app
        self.probe = probe
        self.tracker = tracker
        self.exempt = exempt
        self.stall_timeout_s = stall_timeout_s
        self.max_rebalance_s = max_rebalance_s

    def state(self) -> KafkaState:
        return KafkaState(
            now=time.monotonic(),
            started=self.probe.started(),
            rebalancing=bool(getattr(self.app, "rebalancing", False)),
            recovering=bool(getattr(self.app, "in_recovery", False)),
            coordinator_known=self.probe.coordinator_known(),
            assigned=len(self.probe.assigned()),
            tracker=self.tracker,
            exempt=self.exempt,
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
