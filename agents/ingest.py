"""Ingest: chat events -> MySQL, Redis and the sessions table, a batch at a time."""

from __future__ import annotations

from typing import Any

from streams.app import app, settings
from streams.faust_glue import source_record
from streams.topics import chat_sources
from streams.worker import ingest_processor


@app.agent(chat_sources, name="ingest")
async def ingest(stream: Any) -> None:
    processor = await ingest_processor()
    batch, within = settings.ingest.batch_size, settings.ingest.batch_within_s
    async for events in stream.noack_take(batch, within=within):
        # process() returns only once everything is stored (it retries the
        # database until it answers); only then is the batch acknowledged.
        await processor.process([source_record(e) for e in events])
        for event in events:
            await stream.ack(event)
