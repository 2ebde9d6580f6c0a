"""Ingest: chat events -> MySQL, Redis and the sessions table, a batch at a time.

The processor is the batch sink's writer: stage one stores a batch in MySQL
(retrying until it answers); stage two (Redis, session ends) overlaps the next
batch's stage one; the sink acknowledges a batch once both are done, while this
loop reads on.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from streams.worker.app import app, settings
from streams.worker.batch_sink import BatchSink
from streams.worker.context import worker
from streams.worker.faust_glue import source_record
from streams.worker.topics import chat_sources


@app.agent(chat_sources, name="ingest")
async def ingest(stream: Any) -> None:
    merged = max(settings.ingest.batch_size, settings.ingest.max_merged_batch)
    sink = BatchSink(await worker.ingest_processor(), partial(worker.acknowledge, stream),
                     max_batch=merged, max_pending=2 * merged, name="ingest")
    try:
        async for taken in stream.noack_take(settings.ingest.batch_size,
                                             within=settings.ingest.batch_within_s):
            events = await worker.admitted(stream, taken)
            await sink.add([source_record(e) for e in events], events)
    finally:
        await sink.close()
