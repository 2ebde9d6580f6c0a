"""Ingest: chat events -> MySQL, Redis and the sessions table, a batch at a time.

The processor is the batch sink's writer: stage one stores a batch in MySQL
(retrying until it answers); stage two (Redis, session ends) overlaps the next
batch's stage one; the sink acknowledges a batch once both are done, while this
loop reads on. Records reach the sink through the intake, which holds back the
events of a tenant over its quota (``streams/worker/paced_intake.py``) and lets
them go at a rebalance (``streams/worker/faust_wait_empty.py``).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from streams.worker.app import app, settings
from streams.worker.batch_sink import BatchSink
from streams.worker.context import worker
from streams.worker.faust_glue import source_record
from streams.worker.faust_wait_empty import let_go_while_waiting
from streams.worker.paced_intake import PacedIntake
from streams.worker.topics import chat_sources


@app.agent(chat_sources, name="ingest")
async def ingest(stream: Any) -> None:
    merged = max(settings.ingest.batch_size, settings.ingest.max_merged_batch)
    processor = await worker.ingest_processor()
    sink = BatchSink(processor, partial(worker.acknowledge, stream),
                     max_batch=merged, max_pending=2 * merged, name="ingest")
    intake = PacedIntake(sink, worker.event_pacer(processor), let_go=stream.ack,
                         held=worker.held)
    try:
        with let_go_while_waiting(intake.release, intake.resume):
            async for taken in stream.noack_take(settings.ingest.batch_size,
                                                 within=settings.ingest.batch_within_s):
                events = await worker.admitted(stream, taken)
                await worker.foreground.turn("ingest")  # the worker's queries first
                await intake.add([(source_record(e), e) for e in events])
    finally:
        await intake.close()
        await sink.close()
