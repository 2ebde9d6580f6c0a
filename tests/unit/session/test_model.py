from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from streams.session.model import SPEAKERS_KEPT, SessionState, split_table_key, table_key
from streams.wire.records import ChatMessage, SessionEnd

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def msg(i: int, at: datetime | None = None) -> ChatMessage:
    return ChatMessage(event_id=f"e{i}", type="message", tenant_id="t", user_id="u", agent_id="a",
                       conversation_id="c", role="user", content=f"m{i}",
                       created_at=at or T0 + timedelta(seconds=i))


def end(i: int) -> SessionEnd:
    return SessionEnd(event_id=f"s{i}", type="session_end", tenant_id="t", user_id="u",
                      agent_id="a", conversation_id="c", created_at=T0)


def test_counts_and_activity() -> None:
    s = SessionState.new(msg(0))
    for i in range(3):
        assert s.apply_message(msg(i), "chat", i, now=100.0 + i)
    assert (s.message_count, s.session_message_count, s.unsummarized_count) == (3, 3, 3)
    assert s.first_activity == T0 and s.last_activity == T0 + timedelta(seconds=2)
    assert s.last_seen_at == 102.0 and s.open


def test_replayed_offsets_are_ignored_per_source() -> None:
    s = SessionState.new(msg(0))
    assert s.apply_message(msg(0), "chat", 5, now=1)
    assert not s.apply_message(msg(0), "chat", 5, now=2)
    assert not s.apply_message(msg(0), "chat", 4, now=2)
    assert s.apply_message(msg(1), "sub", 0, now=3)  # another topic has its own offsets
    assert s.message_count == 2


def test_close_starts_a_new_session() -> None:
    s = SessionState.new(msg(0))
    s.apply_message(msg(0), "chat", 0, now=1)
    closed = s.close("explicit", now=10, end=end(1))
    assert closed is not None
    assert (closed.session_seq, closed.message_count, closed.trigger) == (1, 1, "explicit")
    assert closed.closed_id == "t/c#1"
    assert not s.open and s.session_seq == 2 and s.session_message_count == 0
    assert s.close("explicit", now=11) is None  # nothing new: nothing to close
    s.apply_message(msg(1), "chat", 1, now=12)
    again = s.close("idle", now=20)
    assert again is not None and again.session_seq == 2 and again.message_count == 1


def test_a_close_names_the_last_message_of_its_session() -> None:
    s = SessionState.new(msg(0))
    for i in range(3):
        s.apply_message(msg(i), "chat", i, now=i)
    s.apply_message(msg(1), "chat", 1, now=5)  # a replayed offset changes nothing
    first = s.close("explicit", now=10, end=end(1))
    assert first is not None and first.last_event_id == "e2"
    s.apply_message(msg(7), "chat", 7, now=12)
    second = s.close("idle", now=20)
    assert second is not None and second.last_event_id == "e7"


@pytest.mark.parametrize(("tenant", "conv"), [("t", "c"), ("acme", "a/b/c"), ("x.y-z", "agent:1")])
def test_table_key_round_trip(tenant: str, conv: str) -> None:
    assert split_table_key(table_key(tenant, conv)) == (tenant, conv)


def test_round_trips_through_table_json() -> None:
    s = SessionState.new(msg(0))
    s.apply_message(msg(0), "chat", 3, now=1.5)
    again = SessionState.from_table(s.to_table())
    assert again == s and again is not None and again.last_event_id == "e0"


def said_by(i: int, user: str) -> ChatMessage:
    return ChatMessage(event_id=f"e{i}", type="message", tenant_id="t", user_id=user,
                       agent_id=f"agent-of-{user}", conversation_id="c", role="user",
                       content="hi", created_at=datetime(2026, 1, 1, tzinfo=UTC))


@pytest.mark.parametrize(
    ("speakers", "erased", "changed", "named"),
    [
        (["bob", "alice"], ["alice"], True, ("bob", "agent-of-bob", "e0")),
        (["alice", "bob"], ["alice"], True, ("bob", "agent-of-bob", "e1")),
        (["bob", "alice", "alice"], ["alice"], True, ("bob", "agent-of-bob", "e0")),
        (["alice"], ["alice"], False, ("alice", "agent-of-alice", "e0")),
        (["bob", "carol"], ["alice"], False, ("carol", "agent-of-carol", "e1")),
        (["bob", "carol", "alice"], ["alice"], True, ("carol", "agent-of-carol", "e1")),
        # two erasures, one after the other: the state names the one speaker left
        (["carol", "bob", "alice"], ["alice", "bob"], True, ("carol", "agent-of-carol", "e0")),
        (["carol", "bob", "alice"], ["bob", "alice"], True, ("carol", "agent-of-carol", "e0")),
        (["bob", "carol", "bob", "alice"], ["alice", "bob"], True,
         ("carol", "agent-of-carol", "e1")),
    ],
)
def test_forget_speaker(speakers: list[str], erased: list[str], changed: bool,
                        named: tuple[str, str, str]) -> None:
    s = SessionState.new(said_by(0, speakers[0]))
    for i, user in enumerate(speakers):
        s.apply_message(said_by(i, user), "chat", i, 1.0)
    assert any([s.forget_speaker(u) for u in erased]) is changed
    assert (s.user_id, s.agent_id, s.last_event_id) == named
    assert not {p[0] for p in s.previous_speakers} & set(erased)
    assert SessionState.from_table(s.to_table()) == s


def test_a_closing_event_still_to_publish_names_the_erased_speaker_no_more() -> None:
    s = SessionState.new(said_by(0, "bob"))
    s.apply_message(said_by(0, "bob"), "chat", 0, 1.0)
    s.apply_message(said_by(1, "alice"), "chat", 1, 1.0)
    s.close("idle", 2.0)  # unpublished: it names alice, who spoke last
    assert '"alice"' in s.outbox[0]
    assert s.forget_speaker("alice")
    [doc] = s.outbox
    assert "alice" not in doc and '"user_id":"bob"' in doc and '"last_event_id":"e0"' in doc


def test_a_state_remembers_a_bounded_number_of_speakers() -> None:
    s = SessionState.new(said_by(0, "u0"))
    for i in range(30):
        s.apply_message(said_by(i, f"u{i}"), "chat", i, 1.0)
    assert len(s.previous_speakers) == SPEAKERS_KEPT
    assert [p[0] for p in s.previous_speakers] == [f"u{i}" for i in range(21, 29)]
