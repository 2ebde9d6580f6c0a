"""A Faust worker whose agent only acknowledges, in batches as the ingest agent takes
them: what Faust's consumer path costs by itself (``bench/ingest.py``, figure (d)).
It runs Faust as the memstream worker does: the same poll size and stream
buffer.

Run by ``bench/ingest.py``; prints ``NOOP <events> <events/s>`` once it has seen
``NOOP_N`` events of ``NOOP_TOPIC``, then exits.
"""

from __future__ import annotations

import os
import time
from typing import Any

import faust

from streams.worker.faust_glue import delivery_settings

TOPIC = os.environ["NOOP_TOPIC"]
N = int(os.environ["NOOP_N"])
BATCH = 1000

app = faust.App(f"noop-{TOPIC}", broker=os.environ["NOOP_BROKER"], store="memory://",
                consumer_auto_offset_reset="earliest", web_enabled=False,
                datadir=os.environ["NOOP_DATADIR"], Worker="streams.worker.faust_glue:QuietWorker",
                **delivery_settings(BATCH))
source = app.topic(TOPIC, value_serializer="raw")
seen: dict[str, Any] = {"n": 0, "t0": None}


@app.agent(source)
async def drain(stream: Any) -> None:
    async for events in stream.noack_take(BATCH, within=0.05):
        if seen["t0"] is None:
            seen["t0"] = time.perf_counter()
        for event in events:
            await stream.ack(event)
        seen["n"] += len(events)
        if seen["n"] >= N:
            rate = seen["n"] / (time.perf_counter() - seen["t0"])
            print(f"NOOP {seen['n']} {rate:.0f}", flush=True)
            os._exit(0)
