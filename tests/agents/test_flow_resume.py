"""A record delivered while a rebalance's recovery seeks the stream partitions is not
dropped from its stream's queue (``resume_clears_only_a_suspended_flow`` in
``streams/worker/faust_glue.py``).

Faust's own ``Recovery._resume_streams`` runs here, on a Faust app without a broker:
the consumer is a stand-in whose seek to the committed offsets delivers a record into
a stream's queue, as the fetcher does meanwhile once a partition was sought (the flow
runs: recovery resumed it to read the changelogs). That record is fetched once only;
Faust's last resume of the flow emptied the queue and the partition stalled (a
restarted worker never consolidated the session end it had been handed).
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import faust
import pytest
from faust.types import TP

from streams.worker.faust_glue import resume_clears_only_a_suspended_flow

CLOSED = TP("closed", 3)


class SeekingConsumer:
    """What ``_resume_streams`` asks of the consumer; the seek delivers ``record``."""

    def __init__(self, queue: Any, record: object) -> None:
        self.queue = queue
        self.record = record
        self.resumed: set[TP] = set()
        self.flow_resumed = False

    def assignment(self) -> set[TP]:
        return {CLOSED}

    def resume_partitions(self, tps: set[TP]) -> None:
        self.resumed |= tps

    async def perform_seek(self) -> None:
        # the partition is sought; the fetcher, running, delivers its record
        self.queue.put_nowait(self.record)

    def resume_flow(self) -> None:
        self.flow_resumed = True


@pytest.fixture
def app() -> Iterator[Any]:
    resume_clears_only_a_suspended_flow()
    app = faust.App("flow-resume-test", broker="kafka://127.0.0.1:1", store="memory://")
    yield app


async def test_a_record_delivered_while_the_streams_are_sought_is_kept(app: Any) -> None:
    queue = app.FlowControlQueue(maxsize=100, clear_on_resume=True)  # a stream's
    queue.put_nowait("queued before the rebalance")
    app.flow_control.resume()  # recovery reads the changelogs: what was queued goes
    assert queue.qsize() == 0
    consumer = SeekingConsumer(queue, "session end at the committed offset")
    app.consumer = consumer
    app._fetcher = SimpleNamespace(maybe_start=_nothing)
    recovery = app.tables.recovery

    await recovery._resume_streams(generation_id=app.consumer_generation_id)

    assert consumer.resumed == {CLOSED} and consumer.flow_resumed
    assert recovery.completed.is_set()
    assert queue.qsize() == 1 and queue.get_nowait() == "session end at the committed offset"


async def test_resuming_a_suspended_flow_still_drops_what_was_queued_before(app: Any) -> None:
    queue = app.FlowControlQueue(maxsize=100, clear_on_resume=True)
    app.flow_control.resume()
    queue.put_nowait("delivered while running")
    app.flow_control.resume()  # running: nothing changes
    assert queue.qsize() == 1 and app.flow_control.is_active()
    app.flow_control.suspend()  # a rebalance begins
    assert not app.flow_control.is_active()
    app.flow_control.resume()  # ... and ends: the records of the old assignment go
    assert queue.qsize() == 0 and app.flow_control.is_active()


async def _nothing() -> None:
    return None
