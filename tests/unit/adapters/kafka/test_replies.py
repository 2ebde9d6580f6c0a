"""The reply producer's life: a start that fails half-way is closed all the same."""

from __future__ import annotations

import pytest

from streams.adapters.kafka.replies import ReplyPublisher


class HalfStarted:
    """A producer whose start connects, then fails."""

    def __init__(self) -> None:
        self.connected = False
        self.stops = 0

    async def start(self) -> None:
        self.connected = True
        raise OSError("the broker went away during the start")

    async def stop(self) -> None:
        self.stops += 1
        self.connected = False


async def test_a_start_that_failed_half_way_is_closed_by_stop() -> None:
    publisher = ReplyPublisher("kafka://127.0.0.1:9")
    producer = HalfStarted()
    publisher._producer = producer  # type: ignore[assignment]
    with pytest.raises(OSError):
        await publisher.start()
    await publisher.stop()
    assert not producer.connected and producer.stops == 1
