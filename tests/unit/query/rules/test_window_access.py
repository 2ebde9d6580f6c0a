"""Who may read a Session window through a memory query."""

from __future__ import annotations

from typing import Any

import pytest

from streams.query.rules.window_access import may_read_window, speakers


def said(*users: str | None) -> list[dict[str, Any]]:
    return [{"event_id": f"e{n}", "role": "user", "content": "x"}
            | ({"user_id": u} if u is not None else {}) for n, u in enumerate(users)]


@pytest.mark.parametrize(("messages", "asker", "ok"), [
    (said("alice", "alice"), "alice", True),
    (said("alice", "alice"), "bob", False),          # one user: only that user
    (said("alice", "alice"), "Alice", False),        # ids compare exactly
    (said("alice", "alice"), "alice ", False),
    (said("alice", "bob"), "bob", True),             # a group chat: each of its users
    (said("alice", "bob"), "carol", False),
    (said(None, None), "anyone", True),              # stored before the window named users
    (said(None, "alice"), "bob", False),
    ([], "anyone", True),                            # nothing to read
])
def test_the_window_is_read_by_the_users_who_speak_in_it(
        messages: list[dict[str, Any]], asker: str, ok: bool) -> None:
    assert may_read_window(speakers(messages), asker) is ok
