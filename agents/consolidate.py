"""Consolidation: session-closed events -> long-term memories, a batch at a time."""

from __future__ import annotations

from typing import Any

from streams.worker.app import app, settings
from streams.worker.context import worker
from streams.worker.faust_glue import source_record
from streams.worker.topics import session_closed


@app.agent(session_closed, name="consolidate")
async def consolidate(stream: Any) -> None:
    processor = (await worker.consolidation()).processor
    c = settings.consolidation
    async for taken in stream.noack_take(c.batch_size, within=c.batch_within_s):
        events = await worker.admitted(stream, taken)
        # process() returns once every event was consolidated, or handed to
        # memory.retry / memory.dlq; it raises nothing but cancellation
        await processor.process([source_record(e) for e in events])
        await worker.acknowledge(stream, events)
