"""Which sessions ``memstream reprocess`` rebuilds, from a conversation's stored messages.

A session is what live consolidation took as one: the messages stamped with
one session number at ingest. Messages stored before sessions were stamped
(``session_seq`` None) are cut where two of them lie ``gap_s`` or more apart
in event time, as the session windows do.

Only sessions consolidation has finished with are rebuilt (the live path owns
the others): stamped sessions up to the conversation's highest claimed
session, unstamped messages up to its claimed mark. A session is rebuilt whole
when any of its messages is at or after ``since``, and, when ``user`` is given,
only if that user speaks in it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from streams.consolidation.rules.summary import CHAT_ROLES


@dataclass(frozen=True)
class StoredMessage:
    id: int
    role: str
    user_id: str
    agent_id: str
    created_at: datetime
    session_seq: int | None


@dataclass(frozen=True)
class Progress:
    """How far live consolidation has taken a conversation."""

    claimed_session_seq: int = 0
    claimed_until_id: int = 0


@dataclass(frozen=True)
class PlannedSession:
    label: str  # the session number, or ``u{n}`` for the n-th unstamped run
    message_ids: tuple[int, ...]
    user_id: str  # the last user who speaks (else the last message's user)
    agent_id: str
    first_at: datetime
    last_at: datetime


def _finished(m: StoredMessage, done: Progress) -> bool:
    if m.session_seq is None:
        return m.id <= done.claimed_until_id
    return m.session_seq <= done.claimed_session_seq


def _split(messages: Sequence[StoredMessage], gap_s: float) -> list[list[StoredMessage]]:
    runs: list[list[StoredMessage]] = []
    for m in sorted(messages, key=lambda m: (m.created_at, m.id)):
        if runs and (m.created_at - runs[-1][-1].created_at).total_seconds() < gap_s:
            runs[-1].append(m)
        else:
            runs.append([m])
    return runs


def _session(label: str, group: Sequence[StoredMessage]) -> PlannedSession:
    ordered = sorted(group, key=lambda m: m.id)
    speakers = [m for m in ordered if m.role == "user"] or ordered
    times = [m.created_at for m in ordered]
    return PlannedSession(label, tuple(m.id for m in ordered), speakers[-1].user_id,
                          ordered[-1].agent_id, min(times), max(times))


def plan_sessions(messages: Sequence[StoredMessage], done: Progress, *, gap_s: float,
                  since: datetime | None = None,
                  user: str | None = None) -> list[PlannedSession]:
    """The sessions of one conversation to rebuild, oldest first."""
    stamped: dict[int, list[StoredMessage]] = {}
    legacy: list[StoredMessage] = []
    for m in messages:
        if not _finished(m, done):
            continue
        if m.session_seq is None:
            legacy.append(m)
        else:
            stamped.setdefault(m.session_seq, []).append(m)
    groups = [(f"u{i + 1}", g) for i, g in enumerate(_split(legacy, gap_s))]
    groups += [(str(seq), g) for seq, g in sorted(stamped.items())]
    out = []
    for label, group in groups:
        if not any(m.role in CHAT_ROLES for m in group):
            continue
        if since is not None and max(m.created_at for m in group) < since:
            continue
        if user is not None and not any(m.user_id == user for m in group):
            continue
        out.append(_session(label, group))
    return sorted(out, key=lambda s: (s.first_at, s.label))
