"""Consolidation: session-closed events -> long-term memories, each started as it
arrives and acknowledged once handled (``streams/worker/in_flight.py``); those not
begun are let go at a rebalance (``streams/worker/faust_wait_empty.py``)."""

from __future__ import annotations

from typing import Any

from streams.metrics import CONSOLIDATION_PENDING
from streams.worker.app import app, settings
from streams.worker.context import worker
from streams.worker.faust_glue import source_record
from streams.worker.faust_wait_empty import let_go_while_waiting
from streams.worker.in_flight import InFlight
from streams.worker.topics import session_closed


@app.agent(session_closed, name="consolidate")
async def consolidate(stream: Any) -> None:
    processor = (await worker.consolidation()).processor
    # handle() returns once the event was consolidated, or handed to memory.retry /
    # memory.dlq; it raises nothing but cancellation. One conversation (the
    # record's key) at a time, in order; a short session is not held behind a long one.
    flight: InFlight[Any] = InFlight(
        lambda event, begin: processor.handle(source_record(event), on_begin=begin),
        lambda event: worker.acknowledge(stream, [event]),
        key=lambda event: event.message.key, limit=settings.consolidation.max_pending,
        gauge=CONSOLIDATION_PENDING, name="consolidate")
    # at a rebalance or a stop, the session ends not begun are let go unacknowledged
    # (delivered again), so that Faust waits only for the runs under way. Faust then
    # counts them acknowledged, even once delivered again; only the commit guard
    # (every commit passes it) keeps the commit below them until they are finished.
    async with flight:
        with let_go_while_waiting(lambda: flight.release(stream.ack), flight.resume):
            async for event in stream.noack().events():
                for admitted in await worker.admitted(stream, [event]):
                    await flight.add(admitted)
