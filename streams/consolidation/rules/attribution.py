"""Whose memory a candidate is: the user who said what it was judged from.

A conversation may have several users (a group chat, a shared support thread),
and a session may be closed by someone else (a system closer). Each stored
message keeps its own ``user_id``; a candidate belongs to the user of its
source messages, not to whoever closed the session:

* the first source message written by a user (role ``user``) decides;
* else (a candidate judged from assistant messages only) the first source
  message's ``user_id`` (the user the assistant was answering);
* else (sources the session does not hold) the run's own user.

A candidate whose sources were said by several users goes to the first of them;
the judge is asked for one fact per statement, so this is rare.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Author:
    role: str
    user_id: str


def attributed_user(source_event_ids: Sequence[str], authors: Mapping[str, Author],
                    default: str) -> str:
    known = [authors[e] for e in source_event_ids if e in authors]
    spoken = [a.user_id for a in known if a.role == "user"]
    if spoken:
        return spoken[0]
    return known[0].user_id if known else default
