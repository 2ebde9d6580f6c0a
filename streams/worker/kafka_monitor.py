"""Kafka consumer metrics of a worker, and the state the health checks read.

* ``memstream_consumer_lag{topic, partition}``: log end offset minus committed
  offset of every partition the worker's consumer group member owns (table
  changelog partitions excluded: they are read, never committed). Computed
  every ``MEMSTREAM_HEALTH__LAG_INTERVAL_S`` by :class:`LagSampler`; series of
  partitions the worker lost are removed at once.
* ``memstream_consumer_last_progress_timestamp_seconds``: set to the start time
  when the worker starts, advanced whenever a committed offset of a stage
  advances; ``memstream_stage_last_progress_timestamp_seconds{stage}`` and
  ``memstream_stage_lag{stage}`` per stage (:mod:`streams.adapters.kafka.progress`). The query
  consumer feeds the same figures (``streams/adapters/kafka/query_consumer.py``).
* ``memstream_rebalances_total``: rebalances of Faust's group this worker took
  part in.
* ``memstream_commit_seconds``: offset commits that committed something.

:class:`KafkaMonitor` is Faust's Prometheus monitor (the ``faust_*`` metrics)
extended with these, without Faust's per-message series (messages, events,
table reads and writes, sends): memstream counts its own events by topic and
outcome, and that bookkeeping for every record cost the ingest worker about a
tenth of its time. Commits, rebalances, assignments and web requests remain.

Log end offsets come from what the consumer's fetches report (no network
call) and, every ``MEMSTREAM_HEALTH__END_OFFSETS_INTERVAL_S``, from the
brokers, so a partition that is never fetched still shows its lag.

Faust and aiokafka keep the committed offsets, the fetch positions and the
group coordinator in private attributes; :class:`ConsumerProbe` is the only
place that reads them, defensively (missing attributes read as unknown).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, MutableMapping
from typing import Any, Protocol

from faust.sensors.monitor import Monitor
from faust.sensors.prometheus import PrometheusMonitor
from faust.types import TP

from streams.adapters.kafka.progress import (
    ProgressTracker,
    partition_lag,
    publish_progress,
    publish_started,
)
from streams.metrics import (
    COMMIT_LATENCY,
    CONSUMER_LAG,
    REBALANCES,
    STAGE_LAG,
)
from streams.wire.envelope import TPKey

log = logging.getLogger(__name__)


class KafkaMonitor(PrometheusMonitor):
    """Faust's Prometheus monitor, also feeding memstream's Kafka metrics."""

    def __init__(self, tracker: ProgressTracker, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tracker = tracker
        self._tp_commits = 0
        self._commits: dict[float, int] = {}
        publish_started(tracker)

    # per record: nothing (see the module docstring)
    def on_message_in(self, tp: TP, offset: int, message: Any) -> None:
        return None

    def on_message_out(self, tp: TP, offset: int, message: Any) -> None:
        return None

    def on_stream_event_in(self, tp: TP, offset: int, stream: Any, event: Any) -> None:
        return None

    def on_stream_event_out(self, tp: TP, offset: int, stream: Any, event: Any,
                            state: Any = None) -> None:
        return None

    def on_table_get(self, table: Any, key: Any) -> None:
        return None

    def on_table_set(self, table: Any, key: Any, value: Any) -> None:
        return None

    def on_table_del(self, table: Any, key: Any) -> None:
        return None

    def on_send_initiated(self, producer: Any, topic: str, message: Any, keysize: int,
                          valsize: int) -> None:
        return None

    def on_send_completed(self, producer: Any, state: Any, metadata: Any) -> None:
        return None

    def on_send_error(self, producer: Any, exc: BaseException, state: Any) -> None:
        return None

    def track_tp_end_offset(self, tp: TP, offset: int) -> None:
        Monitor.track_tp_end_offset(self, tp, offset)  # the dict, not the gauge

    def on_commit_initiated(self, consumer: Any) -> Any:
        state = super().on_commit_initiated(consumer)
        self._commits[state] = self._tp_commits
        return state

    def on_commit_completed(self, consumer: Any, state: Any) -> None:
        super().on_commit_completed(consumer, state)
        mark = self._commits.pop(state, None)
        if mark is not None and mark != self._tp_commits:
            COMMIT_LATENCY.observe(max(0.0, time.monotonic() - float(state)))

    def on_tp_commit(self, tp_offsets: MutableMapping[TP, int]) -> None:
        super().on_tp_commit(tp_offsets)
        self._tp_commits += 1
        offsets = {(tp.topic, int(tp.partition)): int(o) for tp, o in tp_offsets.items()}
        publish_progress(self.tracker.on_commit(offsets, time.monotonic()))

    def on_rebalance_start(self, app: Any) -> Any:
        state = super().on_rebalance_start(app)
        REBALANCES.inc()
        self.tracker.on_rebalance_start(time.monotonic())
        return state

    def on_rebalance_end(self, app: Any, state: Any) -> None:
        super().on_rebalance_end(app, state)
        self.tracker.on_rebalance_end(time.monotonic())


class ConsumerProbe:
    """Reads the Faust consumer's view of its partitions (private attributes)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    @property
    def consumer(self) -> Any:
        return getattr(self.app, "_consumer", None)

    def _kafka(self) -> Any:
        """The aiokafka consumer inside Faust's consumer thread, when it runs."""
        thread = getattr(self.consumer, "_thread", None)
        return getattr(thread, "_consumer", None)

    def started(self) -> bool:
        return self._kafka() is not None

    def assigned(self) -> set[Any]:
        """Owned partitions whose offsets the group commits (no changelogs)."""
        consumer = self.consumer
        if consumer is None or not self.started():
            return set()
        try:
            tps = set(consumer.assignment())
        except Exception:
            return set()
        changelogs = set(self.app.tables.changelog_topics)
        return {tp for tp in tps if tp.topic not in changelogs}

    def highwater(self, tp: Any) -> int | None:
        try:
            value = self.consumer.highwater(tp)
        except Exception:  # revoked meanwhile
            return None
        return int(value) if value is not None else None

    def committed(self, tp: Any) -> int | None:
        offsets = getattr(self.consumer, "_committed_offset", None)
        value = offsets.get(tp) if offsets is not None else None
        return int(value) if value is not None else None

    def coordinator_known(self) -> bool | None:
        """Whether the group coordinator answers (None: cannot tell)."""
        coordinator = getattr(self._kafka(), "_coordinator", None)
        if coordinator is None or not hasattr(coordinator, "coordinator_id"):
            return None
        return coordinator.coordinator_id is not None

    async def end_offsets(self, tps: list[Any]) -> tuple[dict[Any, int], dict[Any, int]]:
        """Log end and start offsets from the brokers (network calls)."""
        ends = await self.consumer.highwaters(*tps)
        starts = await self.consumer.earliest_offsets(*tps)
        return ({tp: int(o) for tp, o in ends.items() if o is not None},
                {tp: int(o) for tp, o in starts.items() if o is not None})


class LagProbe(Protocol):
    """A consumer's view of its partitions: :class:`ConsumerProbe` for Faust's, the query
    consumer for its own."""

    def assigned(self) -> set[Any]: ...

    def highwater(self, tp: Any) -> int | None: ...

    def committed(self, tp: Any) -> int | None: ...

    async def end_offsets(self, tps: list[Any]) -> tuple[dict[Any, int], dict[Any, int]]: ...


class LagSampler:
    """Computes the lag of every owned partition and publishes it.

    Call :meth:`sample` periodically (a timer; it never writes tables) and
    :meth:`on_revoked` from the partitions-revoked signal. Broker end offsets
    are refreshed in the background, one request at a time, so a sample never
    waits on the network, also while Kafka is down.
    """

    def __init__(self, probe: LagProbe, tracker: ProgressTracker, *,
                 end_offsets_interval_s: float = 30.0) -> None:
        self.probe = probe
        self.tracker = tracker
        self.end_offsets_interval_s = end_offsets_interval_s
        self._series: set[TPKey] = set()
        self._ends: dict[TPKey, int] = {}
        self._starts: dict[TPKey, int] = {}
        self._refresh: asyncio.Task[tuple[dict[Any, int], dict[Any, int]]] | None = None
        self._refreshed_at = float("-inf")

    def _harvest(self, owned: set[TPKey]) -> None:
        task, self._refresh = self._refresh, None
        assert task is not None
        try:
            ends, starts = task.result()
        except Exception as exc:
            log.debug("end offsets unavailable: %s: %s", type(exc).__name__, exc)
            return
        for source, target in ((ends, self._ends), (starts, self._starts)):
            for tp, offset in source.items():
                key = (tp.topic, int(tp.partition))
                if key in owned:
                    target[key] = max(offset, target.get(key, offset))

    def _maybe_refresh(self, tps: list[Any], owned: set[TPKey], now: float) -> None:
        if self._refresh is not None and self._refresh.done():
            self._harvest(owned)
        due = now - self._refreshed_at >= self.end_offsets_interval_s
        if self._refresh is None and tps and due:
            self._refreshed_at = now
            self._refresh = asyncio.ensure_future(self.probe.end_offsets(tps))

    def sample(self, now: float | None = None) -> dict[TPKey, int | None]:
        """Lag per owned partition (None: its end offset is not known yet)."""
        now = time.monotonic() if now is None else now
        tps = {(tp.topic, int(tp.partition)): tp for tp in self.probe.assigned()}
        owned = set(tps)
        for cache in (self._ends, self._starts):
            for key in set(cache) - owned:
                del cache[key]
        self._maybe_refresh(list(tps.values()), owned, now)
        lag: dict[TPKey, int | None] = {}
        for key, tp in tps.items():
            known = [o for o in (self.probe.highwater(tp), self._ends.get(key)) if o is not None]
            lag[key] = partition_lag(max(known) if known else None, self.probe.committed(tp),
                                     self._starts.get(key))
        published = {k for k, n in lag.items() if n is not None}
        for key in published:
            CONSUMER_LAG.labels(key[0], str(key[1])).set(lag[key] or 0)
        self._drop_series(self._series - published)
        self._series = published
        self.tracker.on_lag(lag, now)
        for stage in self.tracker.stages:
            STAGE_LAG.labels(stage).set(self.tracker.stage_lag(stage))
        return lag

    def _drop_series(self, keys: set[TPKey]) -> None:
        for topic, partition in keys:
            with contextlib.suppress(KeyError):
                CONSUMER_LAG.remove(topic, str(partition))
        self._series -= keys

    def on_revoked(self, tps: Iterable[Any]) -> None:
        """Partitions this worker no longer owns: their series go at once."""
        keys = {(tp.topic, int(tp.partition)) for tp in tps}
        self.tracker.forget(keys)
        for cache in (self._ends, self._starts):
            for key in keys:
                cache.pop(key, None)
        self._drop_series(keys & self._series)

    async def close(self) -> None:
        if self._refresh is not None:
            self._refresh.cancel()
            await asyncio.gather(self._refresh, return_exceptions=True)
            self._refresh = None
