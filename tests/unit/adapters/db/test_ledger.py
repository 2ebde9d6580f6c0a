"""The ledger's identity of a message."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from streams.adapters.db.ledger import message_hash

T = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def test_a_message_is_its_text_speaker_and_time_in_its_conversation() -> None:
    base = message_hash("t1", "c1", "user", None, "yes", T)
    assert base == message_hash("t1", "c1", "user", None, "yes", T.replace(tzinfo=None))
    others = [
        message_hash("t2", "c1", "user", None, "yes", T),
        message_hash("t1", "c2", "user", None, "yes", T),
        message_hash("t1", "c1", "assistant", None, "yes", T),
        message_hash("t1", "c1", "user", "Ann", "yes", T),
        message_hash("t1", "c1", "user", None, "yes", T + timedelta(seconds=1)),
        message_hash("t1", "c1", "user", None, "yes!", T),
    ]
    assert base not in others and len(set(others)) == len(others)
