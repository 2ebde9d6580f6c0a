"""Erasure: requests on memory.erasures, carried out one at a time, each answered
with a receipt when it names a reply topic."""

from __future__ import annotations

from typing import Any

from streams.worker.app import app
from streams.worker.context import worker
from streams.worker.faust_glue import source_record
from streams.worker.topics import erasures


@app.agent(erasures, name="erase")
async def erase(stream: Any) -> None:
    processor = await worker.erasure_processor()
    async for event in stream.noack().events():
        for admitted in await worker.admitted(stream, [event]):
            # handle() returns once the erasure is done (resumable: a request delivered
            # again after a crash continues it), refused or blocked
            handled = await processor.handle(source_record(admitted))
            await worker.deliver_erasure(handled)
            await worker.acknowledge(stream, [admitted])
