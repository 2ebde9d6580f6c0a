"""Identifiers compare exactly in MySQL/MariaDB: case counts, and so does a trailing
space of an event id (``utf8mb4_bin`` pads; user, agent and conversation ids with
one are refused at the door)."""

from __future__ import annotations

from streams.query.rules.window_access import may_read_window
from tests.integration.conftest import Stack, chat_event, session_reader
from tests.support.worker import eventually

CONVERSATIONS = ["c-1", "C-1"]


async def test_ids_differing_in_case_or_trailing_space_are_different(stack: Stack) -> None:
    stack.worker().start()
    docs = [chat_event(0, conv, content=f"in {conv!r}", event_id=f"e-{n}")
            for n, conv in enumerate(CONVERSATIONS)]
    # one event id twice with a trailing space: two events, not a duplicate
    docs += [chat_event(1, "c-1", content="first", event_id="e1"),
             chat_event(2, "c-1", content="second", event_id="e1 "),
             chat_event(0, "u-conv", user_id="alice", content="lower"),
             chat_event(1, "u-conv", user_id="Alice", content="upper", event_id="e-u")]
    await stack.produce(docs)
    await eventually(lambda: stack.sql("SELECT COUNT(*) FROM conversation_message")[0][0] == "6",
                     60, "every event stored")
    rows = stack.sql("SELECT CONCAT('[', conversation_id, ']'), COUNT(*) "
                     "FROM conversation_message GROUP BY conversation_id ORDER BY 1")
    assert sorted(tuple(r) for r in rows) == sorted(
        [("[c-1]", "3"), ("[C-1]", "1"), ("[u-conv]", "2")])
    async with session_reader(stack) as reader:
        for conv in CONVERSATIONS:
            window = await reader.window("t1", conv)
            assert f"in {conv!r}" in [m["content"] for m in window.messages]
            assert all(m["content"] in (f"in {conv!r}", "first", "second")
                       for m in window.messages)
    users = stack.sql("SELECT DISTINCT user_id FROM conversation_message "
                      "WHERE conversation_id = 'u-conv' AND user_id = 'alice'")
    assert [u[0] for u in users] == ["alice"]
    collations = stack.sql(
        "SELECT DISTINCT COLLATION_NAME FROM information_schema.COLUMNS "
        "WHERE TABLE_SCHEMA = DATABASE() AND COLUMN_NAME IN "
        "('tenant_id', 'user_id', 'agent_id', 'conversation_id', 'event_id', 'cube')")
    assert [c[0] for c in collations] == ["utf8mb4_nopad_bin"]


async def test_the_window_names_its_speakers_whatever_it_keeps(stack: Stack) -> None:
    """A window of only a system prompt, a tool result and an assistant turn keeps
    no chat turn of its user; it still says whose it is."""
    stack.worker().start()
    await stack.produce([
        chat_event(0, "bob-tools", user_id="bob", role="system", content="you book trains"),
        chat_event(1, "bob-tools", user_id="bob", role="tool", content='{"seat": "12A"}',
                   tool_call_id="t1"),
        chat_event(2, "bob-tools", user_id="bob", role="assistant", content="Seat 12A."),
    ])
    await eventually(lambda: stack.sql("SELECT COUNT(*) FROM conversation_message")[0][0] == "3",
                     60, "stored")
    async with session_reader(stack) as reader:
        window = await reader.window("t1", "bob-tools", last_n=1)
    assert window.speakers == ["bob"]
    assert "speakers" not in window.to_dict()
    assert may_read_window(window.speakers, "bob")
    assert not may_read_window(window.speakers, "carol")
