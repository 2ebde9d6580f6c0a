"""Consolidation: session-closed events -> long-term memories, each started as it
arrives and acknowledged once handled (``streams/worker/in_flight.py``)."""

from __future__ import annotations

from typing import Any

from streams.metrics import CONSOLIDATION_PENDING
from streams.worker.app import app, settings
from streams.worker.context import worker
from streams.worker.faust_glue import source_record
from streams.worker.in_flight import InFlight
from streams.worker.topics import session_closed


@app.agent(session_closed, name="consolidate")
async def consolidate(stream: Any) -> None:
    processor = (await worker.consolidation()).processor
    # handle() returns once the event was consolidated, or handed to memory.retry /
    # memory.dlq; it raises nothing but cancellation. One conversation (the
    # record's key) at a time, in order; a short session is not held behind a long one.
    flight: InFlight[Any] = InFlight(
        lambda event: processor.handle(source_record(event)),
        lambda event: worker.acknowledge(stream, [event]),
        key=lambda event: event.message.key, limit=settings.consolidation.max_pending,
        gauge=CONSOLIDATION_PENDING, name="consolidate")
    async with flight:
        async for event in stream.noack().events():
            for admitted in await worker.admitted(stream, [event]):
                await flight.add(admitted)
