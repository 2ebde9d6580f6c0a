"""Who may read a conversation's Session window through a memory query.

A conversation belongs to its tenant and to the users who speak in it: a
query names its user, and the window of a conversation in which that user
does not speak is withheld (the reply says so in ``warnings``). A group chat
is readable by each of its users. Messages stored before the window carried
user ids name no one; a window of only those is readable within the tenant,
as before.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any


def speakers(messages: Iterable[Mapping[str, Any]]) -> set[str]:
    return {str(m["user_id"]) for m in messages if m.get("user_id") is not None}


def may_read_window(users: Collection[str], asker: str) -> bool:
    """``users``: the speakers of every message the window considered (chat,
    system and tool messages alike, whether or not the window kept them)."""
    return not users or asker in users
