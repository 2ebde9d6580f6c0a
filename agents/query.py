"""Query: memory lookups on memory.queries, one reply per request."""

from __future__ import annotations

from typing import Any

from streams.app import app, settings
from streams.faust_glue import source_record
from streams.topics import memory_queries
from streams.worker import acknowledge, deliver_answer, query_processor


@app.agent(memory_queries, name="query", concurrency=settings.query.concurrency)
async def answer(stream: Any) -> None:
    processor = await query_processor()
    # no table writes here, so concurrency > 1 is safe; handle() never raises
    async for event in stream.noack().events():
        await deliver_answer(await processor.handle(source_record(event)))
        await acknowledge(stream, [event])
