"""Retries: closing events from memory.retry, each attempted when it is due."""

from __future__ import annotations

from functools import partial
from typing import Any

from streams.worker.app import app
from streams.worker.context import worker
from streams.worker.faust_glue import source_record
from streams.worker.topics import retry


@app.agent(retry, name="consolidation-retry")
async def consolidation_retry(stream: Any) -> None:
    scheduler = await worker.retry_scheduler()
    async with scheduler.running():
        async for event in stream.noack().events():
            # held until due, acknowledged after its attempt (or let go undone
            # when a rebalance starts: read again from the committed offset)
            await scheduler.admit(source_record(event),
                                  partial(worker.acknowledge, stream, [event]),
                                  partial(worker.let_go, stream, [event]))
