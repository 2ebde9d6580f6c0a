"""Every worker reads the erasure log now and then (new erasures are skipped by its
ingest and consolidation, finished ones drop its caches); the leader runs the
retention deletes and the episode retention when they are configured."""

from __future__ import annotations

import logging

from streams.worker.app import app, settings
from streams.worker.context import worker
from streams.worker.faust_glue import timer

log = logging.getLogger(__name__)


@timer(app, settings.erasure.sync_interval_s, name="erasure-sync")
async def sync_erasures() -> None:
    try:
        await worker.sync_erasures()
    except Exception as exc:  # the next tick tries again; a timer must not crash the app
        log.warning("reading the erasure log failed: %s: %s", type(exc).__name__, exc)


@timer(app, settings.erasure.retention_interval_s, on_leader=True, name="retention")
async def apply_retention() -> None:
    e = settings.erasure
    if e.message_retention_days is None and e.summary_retention_days is None:
        return
    try:
        await (await worker.retention()).run()
    except Exception as exc:  # the next run goes on where this one stopped
        log.warning("retention run failed: %s: %s", type(exc).__name__, exc)


@timer(app, settings.consolidation.episode_retention_interval_s, on_leader=True,
       name="episode-retention")
async def retire_episodes() -> None:
    try:
        retention = await worker.episode_retention()
        if retention.enabled:
            await retention.run()
    except Exception as exc:  # the next pass goes on where this one stopped
        log.warning("episode retention failed: %s: %s", type(exc).__name__, exc)
