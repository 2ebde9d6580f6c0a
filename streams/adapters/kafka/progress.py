"""Consumer progress per stage, on the monotonic clock of the caller: what the
liveness check (``streams/worker/health.py``) decides on. Pure: the consumers feed it
their commits, lag samples and rebalances.

A worker runs three stages, each on its own topics: *ingest* (chat, sub-agent
and idle-check topics), *consolidation* (session-closed) and *query*. One
:class:`ProgressTracker` follows one consumer group membership — Faust's (ingest
and consolidation) or the query consumer's — and keeps, per stage, when one of
its committed offsets last advanced and since when it has had lag. Exempt topics
(the retry topic, whose records wait until they are due) show their lag but
belong to no stage. A topic named by no stage is a stage of its own.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from streams.metrics import CONSUMER_PROGRESS, STAGE_PROGRESS
from streams.wire.envelope import TPKey


def partition_lag(end: int | None, committed: int | None, earliest: int | None) -> int | None:
    """Messages of one partition not yet committed; None when the end is unknown.

    With no committed offset the group starts at the log start (the consumer
    reads from the earliest offset), so that is the base when it is known.
    """
    if end is None:
        return None
    base = committed if committed is not None else (earliest or 0)
    return max(0, end - base)


@dataclass
class StageProgress:
    progress_at: float
    lag_since: float | None = None


@dataclass
class ProgressTracker:
    """Progress, lag and rebalances of one consumer group membership."""

    started_at: float
    stage_of: Mapping[str, str] = field(default_factory=dict)
    exempt: frozenset[str] = frozenset()
    rebalancing_since: float | None = None
    last_assignment_at: float | None = None
    assignments: int = 0
    lag: dict[TPKey, int] = field(default_factory=dict)
    unknown: set[TPKey] = field(default_factory=set)
    committed: dict[TPKey, int] = field(default_factory=dict)
    stages: dict[str, StageProgress] = field(init=False)

    def __post_init__(self) -> None:
        self.stages = {s: StageProgress(self.started_at) for s in self.stage_of.values()}

    def stage(self, topic: str) -> str | None:
        """The stage a topic belongs to; None for an exempt topic."""
        if topic in self.exempt:
            return None
        return self.stage_of.get(topic, topic)

    def _progress(self, stage: str) -> StageProgress:
        if stage not in self.stages:
            self.stages[stage] = StageProgress(self.started_at)
        return self.stages[stage]

    @property
    def last_progress_at(self) -> float:
        """The last progress of any stage (the start time before any)."""
        return max((p.progress_at for p in self.stages.values()), default=self.started_at)

    def on_commit(self, offsets: Mapping[TPKey, int], now: float) -> set[str]:
        """Record committed offsets; the stages that moved forward (exempt topics are
        recorded, and advance no stage)."""
        advanced: set[str] = set()
        for tp, offset in offsets.items():
            if offset > self.committed.get(tp, -1):
                self.committed[tp] = offset
                stage = self.stage(tp[0])
                if stage is not None:
                    advanced.add(stage)
                    self._progress(stage).progress_at = now
        return advanced

    def on_rebalance_start(self, now: float) -> None:
        if self.rebalancing_since is None:
            self.rebalancing_since = now

    def on_rebalance_end(self, now: float) -> None:
        self.rebalancing_since = None
        self.last_assignment_at = now
        self.assignments += 1

    def forget(self, tps: Iterable[TPKey]) -> None:
        for tp in tps:
            self.committed.pop(tp, None)
            self.lag.pop(tp, None)
            self.unknown.discard(tp)

    def on_lag(self, lag: Mapping[TPKey, int | None], now: float) -> None:
        """A new lag sample of every owned partition (None: end offset unknown)."""
        self.lag = {tp: n for tp, n in lag.items() if n is not None}
        self.unknown = {tp for tp, n in lag.items() if n is None}
        for stage in {*self.stages, *(s for tp in self.lag if (s := self.stage(tp[0])))}:
            progress = self._progress(stage)
            if self.stage_lag(stage) > 0:
                if progress.lag_since is None:
                    progress.lag_since = now
            else:
                progress.lag_since = None

    def stage_lag(self, stage: str) -> int:
        """Messages waiting in the stage's partitions."""
        return sum(n for (topic, _), n in self.lag.items() if self.stage(topic) == stage)

    def stall_lag(self) -> int:
        """Lag of the partitions whose lag means work waits (not the exempt topics)."""
        return sum(n for (topic, _), n in self.lag.items() if topic not in self.exempt)


def publish_started(tracker: ProgressTracker) -> None:
    """The progress gauges of a consumer that starts: its start time, per stage."""
    now = time.time()
    CONSUMER_PROGRESS.set(now)
    for stage in tracker.stages:
        STAGE_PROGRESS.labels(stage).set(now)


def publish_progress(stages: Iterable[str]) -> None:
    """Committed offsets of these stages advanced just now."""
    advanced = list(stages)
    if advanced:
        now = time.time()
        CONSUMER_PROGRESS.set(now)
        for stage in advanced:
            STAGE_PROGRESS.labels(stage).set(now)
