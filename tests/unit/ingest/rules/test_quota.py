"""Which chat events count against their tenant's quota of events, and the
rejection of one over it."""

from __future__ import annotations

import pytest

from streams.ingest.rules.quota import counts, over_quota
from streams.wire.rejections import OVER_QUOTA, REASONS


@pytest.mark.parametrize(("topic", "counted"), [
    ("chat.messages", True),          # first read: counts
    ("memory.subagent-chat", False),  # re-keyed by ingest: counted where first read
    ("memory.session-idle", False),   # memstream's own idle checks and fences
    ("memory.retry", False),
])
def test_an_event_counts_where_it_is_first_read(topic: str, counted: bool) -> None:
    assert counts(topic, chat_topic="chat.messages") is counted


def test_over_quota_is_a_reason_of_its_own() -> None:
    rejected = over_quota("over the events quota of tenant 'a' (1 a second, 1 at once)")
    assert (rejected.reason, rejected.error_class) == (OVER_QUOTA, "OverQuota")
    assert rejected.message.startswith("over the events quota")
    assert OVER_QUOTA in REASONS
