"""A session cut at ingest by size: closed after the message that reached the bound,
as by a session end; the next message opens a new session."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from streams.session.model import SessionState
from streams.session.rules.batch import SessionRules, SourcedEvent, plan_sessions
from streams.wire.records import ChatMessage, SessionEnd

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def msg(i: int, text: str, conv: str = "c") -> ChatMessage:
    return ChatMessage(event_id=f"{conv}-{i}", type="message", tenant_id="t", user_id="u",
                       agent_id="a", conversation_id=conv, role="user", content=text,
                       created_at=T0 + timedelta(seconds=i))


def end(i: int) -> SessionEnd:
    return SessionEnd(event_id=f"end-{i}", type="session_end", tenant_id="t", user_id="u",
                      agent_id="a", conversation_id="c", created_at=T0 + timedelta(seconds=i))


# texts (E: a session end), bounds, expected stamps, closed (session, messages), cuts
CUTS = [
    # no bound reached
    ("aa bb", 3, 100, [1, 1], [], []),
    # the third message reaches the message bound: closed after it, the fourth opens #2
    ("a b c d", 3, 100, [1, 1, 1, 2], [(1, 3)], ["messages"]),
    ("a b c d e f g", 3, 100, [1, 1, 1, 2, 2, 2, 3], [(1, 3), (2, 3)],
     ["messages", "messages"]),
    # bytes: "xxxx" + "yyyyyy" = 10 bytes reaches 10
    ("xxxx yyyyyy z", 100, 10, [1, 1, 2], [(1, 2)], ["bytes"]),
    # one message over the bytes closes its session alone
    ("a " + "w" * 50 + " b", 100, 10, [1, 1, 2], [(1, 2)], ["bytes"]),
    # UTF-8 bytes, not characters: "éé" is 4 bytes
    ("éé éé", 100, 8, [1, 1], [(1, 2)], ["bytes"]),
    # a session end right after a cut closes nothing more
    ("a b E c", 2, 100, [1, 1, 2], [(1, 2)], ["messages"]),
    # a session end before the bound closes as always, and the count starts again
    ("a E b c d", 2, 100, [1, 2, 2, 3], [(1, 1), (2, 2)], ["messages"]),
]


@pytest.mark.parametrize(("script", "max_messages", "max_bytes", "stamps", "closed", "cuts"),
                         CUTS)
def test_a_session_reaching_its_size_is_closed_after_that_message(
        script: str, max_messages: int, max_bytes: int, stamps: list[int],
        closed: list[tuple[int, int]], cuts: list[str]) -> None:
    events: list[ChatMessage | SessionEnd] = [
        end(n) if word == "E" else msg(n, word) for n, word in enumerate(script.split())]
    rules = SessionRules(idle_timeout_s=600.0, retention_s=3600.0, max_messages=max_messages,
                         max_bytes=max_bytes)
    plan = plan_sessions([SourcedEvent("chat", n, e) for n, e in enumerate(events)], {}.get, {},
                         now=1000.0, rules=rules)
    assert [plan.stamps[i] for i, e in enumerate(events) if isinstance(e, ChatMessage)] == stamps
    assert [(c.session_seq, c.message_count) for c in plan.closed] == closed
    assert plan.cut == [("t", bound) for bound in cuts]
    assert [c.trigger for c in plan.closed] == ["explicit"] * len(closed)
    assert [c.closed_id for c in plan.publish] == [f"t/c#{s}" for s, _ in closed]


def test_the_count_survives_the_table_and_a_cut_session_takes_no_late_message() -> None:
    rules = SessionRules(idle_timeout_s=600.0, retention_s=3600.0, grace_s=300.0,
                         max_messages=100, max_bytes=10)
    first = plan_sessions([SourcedEvent("chat", 0, msg(5, "xxxxxx"))], {}.get, {}, now=1000.0,
                          rules=rules)
    state = first.states["t/c"]
    assert state.session_bytes == 6
    stored = SessionState.from_table(state.to_table())
    assert stored is not None and stored.session_bytes == 6
    second = plan_sessions([SourcedEvent("chat", 1, msg(6, "yyyy")),
                            SourcedEvent("chat", 2, msg(1, "older"))],
                           {"t/c": state.to_table()}.get, {}, now=1001.0, rules=rules)
    assert [c.session_seq for c in second.closed] == [1]
    # an older message after the cut opens the next session, it does not join the cut one
    assert second.stamps == {0: 1, 1: 2} and not second.late
    assert second.states["t/c"].session_bytes == 5
