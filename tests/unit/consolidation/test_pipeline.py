"""A run's episodes: each new chat message, with its speaker, time and id."""

from __future__ import annotations

from datetime import UTC, datetime

from streams.consolidation.model import SessionMessage
from streams.consolidation.pipeline import episodes_of

T = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def test_episodes_are_the_chat_messages_with_their_speaker_time_and_id() -> None:
    msgs = [SessionMessage(1, "e1", "user", "I went to Rome.", T),
            SessionMessage(2, "e2", "tool", "{}", T),
            SessionMessage(3, "e3", "assistant", "  ", T),
            SessionMessage(4, "e4", "assistant", "x" * 300, T, name="Bot")]
    eps = episodes_of(msgs, max_chars=100)
    assert [e.candidate.content[:20] for e in eps] == ["User: I went to Rome",
                                                       "Bot: xxxxxxxxxxxxxxx"]
    assert all(e.episode and e.cube == "user_profile" for e in eps)
    assert eps[0].candidate.source_event_ids == ("e1",) and eps[0].candidate.event_time == T
    assert eps[0].candidate.kind == "episode" and len(eps[1].candidate.content) <= 100
