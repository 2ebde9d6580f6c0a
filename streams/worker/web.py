"""The worker's HTTP endpoints on the Faust web server, and what feeds them:

* ``/metrics`` — memstream's metrics (:mod:`streams.metrics`) and Faust's own
  sensor (prefixed ``faust_``, without its per-record series), one registry;
* ``/health/live`` and ``/health/ready`` (:mod:`streams.worker.health`), over Faust's
  consumer and the query consumer;
* ``/stats/*``, the read-only stats API (:mod:`streams.stats`), behind bearer
  tokens (:mod:`streams.stats.access`).

Faust's own ``/router`` and ``/table`` pages are off unless ``web.faust_pages``
(``streams/worker/app.py``).

:func:`install` also replaces Faust's monitor with :class:`KafkaMonitor`
(commit latency, progress, rebalances), samples the lag of both consumers on a
timer, and purges old search records on the leader.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from aiohttp.web import Response
from faust.sensors.prometheus import FaustMetrics
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.kafka.progress import ProgressTracker
from streams.adapters.kafka.query_consumer import QueryConsumer
from streams.clock import naive_utc_now
from streams.settings import Settings
from streams.stats.access import StatsAccess, TokenGrant
from streams.stats.http import install_stats
from streams.stats.search_log import SearchLog
from streams.stats.service import QuotaView, StatsService
from streams.worker.faust_glue import timer
from streams.worker.health import HealthChecks, install_health
from streams.worker.kafka_monitor import ConsumerProbe, KafkaMonitor, LagSampler
from streams.worker.query_supervisor import QuerySupervisor
from streams.worker.runtime import Runtime

log = logging.getLogger(__name__)
SEARCH_LOG_PURGE_INTERVAL_S = 3600.0


@dataclass(frozen=True)
class Observability:
    tracker: ProgressTracker
    samplers: tuple[LagSampler, ...]
    health: HealthChecks
    stats: StatsService


def faust_stages(settings: Settings) -> dict[str, str]:
    """The stages of Faust's consumer, by topic (the retry topic is exempt). An erasure
    acknowledges its request at the end of each turn (``MEMSTREAM_ERASURE__TURN_S``, at
    most half the stall timeout), done or requeued, so a stage ``erasure`` that does not
    move is stuck, not busy."""
    k = settings.kafka
    return {k.chat_topic: "ingest", k.subagent_topic: "ingest", k.idle_topic: "ingest",
            k.session_closed_topic: "consolidation", k.erasures_topic: "erasure"}


def install(app: Any, runtime: Runtime, settings: Settings,
            queries: QueryConsumer | None, quotas: Mapping[str, QuotaView] | None = None,
            *, query_process: QuerySupervisor | None = None) -> Observability:
    """Install the monitor, the timers and every page on ``app``'s web server;
    ``quotas``: the worker's quota books, read by ``/stats/quotas``; ``queries``: the
    worker's query consumer (None when ``query_process`` answers them: the health checks
    then count the time it has not been answering)."""
    tracker = ProgressTracker(started_at=time.monotonic(), stage_of=faust_stages(settings),
                              exempt=frozenset({settings.kafka.retry_topic}))
    app.monitor = KafkaMonitor(tracker, metrics=FaustMetrics.create(REGISTRY, "faust"))

    async def metrics(self: Any, request: Any) -> Any:
        return Response(body=generate_latest(REGISTRY),
                        headers={"Content-Type": CONTENT_TYPE_LATEST}, status=200)

    app.page("/metrics", name="metrics")(metrics)

    probe = ConsumerProbe(app)
    h = settings.health
    sampler = LagSampler(probe, tracker, end_offsets_interval_s=h.end_offsets_interval_s)
    samplers = [sampler] + ([] if queries is None else [LagSampler(
        queries, queries.tracker, end_offsets_interval_s=h.end_offsets_interval_s)])

    @timer(app, h.lag_interval_s, name="consumer-lag")
    async def sample_lag() -> None:
        for s in samplers:
            try:
                s.sample()
            except Exception as exc:  # the next sample tries again
                log.warning("consumer lag sample failed: %s: %s", type(exc).__name__, exc)

    async def on_revoked(sender: Any, revoked: Any, **kwargs: Any) -> None:
        sampler.on_revoked(revoked)

    app.on_partitions_revoked.connect(on_revoked)

    async def close_sampler(sender: Any, /, *args: Any, **kwargs: Any) -> None:
        for s in samplers:
            await s.close()

    app.on_before_shutdown.connect(close_sampler)

    checks = HealthChecks(app, probe, tracker, query=queries, stall_timeout_s=h.stall_timeout_s,
                          max_rebalance_s=h.max_rebalance_s,
                          query_process_down=None if query_process is None
                          else query_process.down_for)
    install_health(app, checks)

    async def engine() -> AsyncEngine:
        await runtime.start()
        return runtime.engine

    w = settings.web
    stats = StatsService(engine, max_limit=w.stats_max_limit, max_buckets=w.stats_max_buckets,
                         timeout_s=w.stats_timeout_s, quotas=quotas,
                         model_usage=runtime.model_meter, sensitive=runtime.sensitive_counts)
    install_stats(app, stats, StatsAccess(
        TokenGrant(t.sha256, frozenset(t.tenants)) for t in w.stats_tokens))

    @timer(app, SEARCH_LOG_PURGE_INTERVAL_S, on_leader=True, name="search-log-purge")
    async def purge_search_log() -> None:
        cutoff = naive_utc_now() - timedelta(days=w.stats_search_log_retention_days)
        try:
            rows = await SearchLog(await engine()).purge(cutoff)
            if rows:
                log.info("purged %d search records older than %s", rows, cutoff.isoformat())
        except Exception as exc:  # the next run tries again
            log.warning("search log purge failed: %s: %s", type(exc).__name__, exc)

    return Observability(tracker, tuple(samplers), checks, stats)
