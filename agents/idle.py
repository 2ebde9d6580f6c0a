"""The idle scan: sessions open with no event for SESSION_IDLE_TIMEOUT get an
idle check, which the ingest agent acts on (a timer may not write tables)."""

from __future__ import annotations

import logging
from typing import Any

from streams.metrics import SESSIONS_OPEN
from streams.worker.app import app, settings
from streams.worker.context import worker
from streams.worker.faust_glue import timer

log = logging.getLogger(__name__)


@timer(app, settings.consolidation.idle_scan_interval_s, name="session-idle-scan")
async def scan_idle_sessions() -> None:
    try:
        scanner = await worker.idle_scanner()
        checks = await worker.idle_checks(scanner)
        SESSIONS_OPEN.set(scanner.open_sessions)
        if checks:
            await worker.publisher.publish(checks)
    except Exception as exc:  # the next scan tries again; a timer must not crash the app
        log.warning("idle scan failed: %s: %s", type(exc).__name__, exc)


async def rescan_idle_sessions(sender: Any, /, *args: Any, **kwargs: Any) -> None:
    """The partitions changed: the next scan reads this worker's part of the table."""
    worker.rescan_idle()


for signal in (app.on_partitions_revoked, app.on_partitions_assigned, app.on_rebalance_complete):
    signal.connect(rescan_idle_sessions)
