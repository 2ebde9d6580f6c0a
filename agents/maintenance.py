"""Periodic upkeep: on the leader, retry failed expiries and purge the old ledgers; on
every worker, watch how long the event loop is held (and tell the quotas when the worker
is loaded)."""

from __future__ import annotations

import logging
import time

from streams.metrics import EVENT_LOOP_LAG
from streams.worker.app import app, settings
from streams.worker.context import worker
from streams.worker.faust_glue import timer
from streams.worker.loop_lag import LoopLagWatch

log = logging.getLogger(__name__)
PURGE_INTERVAL_S = 3600.0


@timer(app, settings.consolidation.expiry_sweep_interval_s, on_leader=True,
       name="expiry-sweep")
async def sweep_expiries() -> None:
    try:
        done, failed = await (await worker.consolidation()).sweeper.sweep()
        if done or failed:
            log.info("pending expiries: %d done, %d still failing", done, failed)
    except Exception as exc:  # the next sweep tries again
        log.warning("expiry sweep failed: %s: %s", type(exc).__name__, exc)


@timer(app, PURGE_INTERVAL_S, on_leader=True, name="ledger-purge")
async def purge_ledger() -> None:
    try:
        days = settings.consolidation.ledger_retention_days
        rows, runs, letters = await worker.purge(days)
        if rows or runs or letters:
            log.info("purged %d ledger rows, %d finished runs and %d dead-letter records",
                     rows, runs, letters)
    except Exception as exc:
        log.warning("ledger purge failed: %s: %s", type(exc).__name__, exc)


_lag = LoopLagWatch()


@timer(app, _lag.interval_s, name="event-loop-lag", steady=True)
async def watch_event_loop() -> None:
    now = time.monotonic()
    lag, line = _lag.tick(now)
    EVENT_LOOP_LAG.observe(lag)
    worker.quotas.load.note_lag(lag, now)
    worker.loop_busy.measure()
    if line is not None:
        log.warning("%s", line)
