from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from streams.ingest.rules.subagent import Disposition, as_parent_message, disposition
from streams.wire.records import ChatMessage, SessionEnd

NOW = datetime(2026, 11, 30, tzinfo=UTC)


def msg(**kw: Any) -> ChatMessage:
    base: dict[str, Any] = dict(
        event_id="e", type="message", tenant_id="t", user_id="u", agent_id="a",
        conversation_id="agent:c1:helper", parent_conversation_id="c1",
        role="assistant", content="found it", created_at=NOW,
    )
    base.update(kw)
    return ChatMessage(**base)


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (msg(conversation_id="c1", parent_conversation_id=None), Disposition.KEEP),
        (msg(conversation_id="c1", parent_conversation_id=None, role="tool"), Disposition.KEEP),
        (msg(), Disposition.REROUTE),
        (msg(role="user", content="please look it up"), Disposition.REROUTE),
        (msg(role="system", content="you are a helper"), Disposition.DROP),
        (msg(role="tool", content="{}"), Disposition.DROP),
        (msg(content="", tool_calls=[{"id": "x"}]), Disposition.DROP),
        (msg(content="calling", tool_calls=[{"id": "x"}]), Disposition.DROP),
        (msg(content="   "), Disposition.DROP),
        (msg(parent_conversation_id="agent:outer"), Disposition.DROP),
        (SessionEnd(event_id="s", type="session_end", tenant_id="t", user_id="u", agent_id="a",
                    conversation_id="agent:c1:helper", created_at=NOW), Disposition.DROP),
        (SessionEnd(event_id="s", type="session_end", tenant_id="t", user_id="u", agent_id="a",
                    conversation_id="c1", created_at=NOW), Disposition.KEEP),
    ],
)
def test_disposition(event: ChatMessage | SessionEnd, expected: Disposition) -> None:
    assert disposition(event) is expected


def test_parent_copy_keeps_identity_and_moves_conversation() -> None:
    m = msg()
    p = as_parent_message(m)
    assert (p.conversation_id, p.parent_conversation_id) == ("c1", None)
    assert (p.event_id, p.content, p.role, p.tenant_id) == (
        m.event_id, m.content, m.role, m.tenant_id
    )


def test_parent_copy_refuses_virtual_parent() -> None:
    with pytest.raises(ValueError):
        as_parent_message(msg(parent_conversation_id="agent:x"))
