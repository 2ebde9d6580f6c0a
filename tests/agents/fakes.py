"""In-memory stand-ins for the stores the processors write to. The doubles of the
stages' ports, and the publisher, live in :mod:`streams.testing`; the names the
agents-tier tests use are given to them here."""

from __future__ import annotations

from streams.testing.memory import FakeChatModel, FakeMemoryProvider
from streams.testing.outbox import RecordingPublisher as FakePublisher
from streams.testing.session import InMemoryHotCopy as FakeCache
from streams.testing.session import InMemorySessionTable as FakeTable

__all__ = ["FakeCache", "FakeChatModel", "FakeMemoryProvider", "FakePublisher", "FakeTable"]
