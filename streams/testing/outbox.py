"""A :class:`~streams.wire.envelope.Publisher` that keeps what it was given."""

from __future__ import annotations

from collections.abc import Sequence

from streams.wire.envelope import Outgoing


class PublishFailed(Exception):
    """What :class:`RecordingPublisher` raises when told to fail (a broker outage)."""


class RecordingPublisher:
    """``sent``: every record published, in order. ``fail_next``: the next n
    publishes raise :class:`PublishFailed`, sending nothing."""

    def __init__(self) -> None:
        self.sent: list[Outgoing] = []
        self.fail_next = 0

    async def publish(self, records: Sequence[Outgoing]) -> None:
        if self.fail_next:
            self.fail_next -= 1
            raise PublishFailed("broker unavailable")
        self.sent.extend(records)

    def on(self, topic: str) -> list[Outgoing]:
        """What was published to ``topic``."""
        return [r for r in self.sent if r.topic == topic]
