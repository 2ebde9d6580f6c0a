"""Erasure: requests on memory.erasures, carried out one at a time, each answered
with a receipt when it names a reply topic. One delivery carries an erasure for
one turn at most: past it, or when a rebalance or a shutdown begins, the request
goes to the end of the topic again and is acknowledged (Faust waits for every
record it handed out before a rebalance goes on)."""

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
            # again after a crash continues it), refused, blocked, or requeued (its
            # turn is over: the copy is produced before this one is acknowledged)
            handled = await processor.handle(source_record(admitted))
            await worker.deliver_erasure(handled)
            await worker.acknowledge(stream, [admitted])
