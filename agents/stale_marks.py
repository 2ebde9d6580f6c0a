"""Every worker re-reads the stale-history marks now and then: after a
rebalance it may write conversations another worker could not write to Redis,
and it must drop those lists rather than append to them."""

from __future__ import annotations

import logging

from streams.worker.app import app, settings
from streams.worker.context import worker
from streams.worker.faust_glue import timer

log = logging.getLogger(__name__)
SYNC_INTERVAL_S = 10.0


@timer(app, SYNC_INTERVAL_S, name="stale-marks-sync")
async def sync_stale_marks() -> None:
    if settings.redis.url is None:
        return
    try:
        await worker.sync_stale_marks()
    except Exception as exc:  # the next tick tries again; a timer must not crash the app
        log.warning("reading stale-history marks failed: %s: %s", type(exc).__name__, exc)
