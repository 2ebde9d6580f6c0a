"""A Faust app that pauses its partition in the middle of a fetched batch.

Faust's consumer drops, without a word, the records of a fetched batch whose
partition stops being active while the batch is delivered, and counts the jump
to the next record it delivers as acknowledged. This app provokes exactly that
(``Consumer.pause_partitions`` while records of the batch wait) and acknowledges
every record it sees; with ``GUARD=1`` it runs memstream's commit guard as the
worker does, and like the worker's stages processes only the records the guard
admits (in order; the others are acknowledged to Faust only). It appends every
offset it processes to ``OUT``.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import faust
from faust.types import TP

from streams.worker.commit_guard import CommitGuard
from streams.worker.faust_glue import admit, delivery_settings, finish, install_commit_guard

TOPIC = os.environ["TOPIC"]
PAUSE_AT = int(os.environ["PAUSE_AT"])
OUT = os.environ["OUT"]

guard = CommitGuard()
GUARDED = os.environ.get("GUARD") == "1"
if GUARDED:
    install_commit_guard(guard, recover_after_s=2.0)

app = faust.App(os.environ["APP_ID"], broker=os.environ["BROKER"], store="memory://",
                consumer_auto_offset_reset="earliest", web_enabled=False,
                broker_commit_interval=0.5, broker_session_timeout=6,
                broker_heartbeat_interval=1, datadir=os.environ["DATADIR"],
                Worker="streams.worker.faust_glue:QuietWorker", **delivery_settings(100))
source = app.topic(TOPIC, value_serializer="raw")
paused = False


async def resume_later(tp: Any) -> None:
    await asyncio.sleep(0.5)
    app.consumer.resume_partitions([tp])


@app.agent(source)
async def drain(stream: Any) -> None:
    global paused
    async for event in stream.noack().events():
        m = event.message
        if GUARDED and not admit(guard, event):
            await stream.ack(event)
            continue
        with open(OUT, "a") as out:
            out.write(f"{m.offset}\n")
        if m.offset == PAUSE_AT and not paused:
            paused = True
            tp = TP(m.topic, m.partition)
            app.consumer.pause_partitions([tp])
            asyncio.ensure_future(resume_later(tp))  # noqa: RUF006
        finish(guard, event)
        await stream.ack(event)


if __name__ == "__main__":
    app.main()
