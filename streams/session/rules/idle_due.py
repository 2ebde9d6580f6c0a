"""When a session state is due for an idle check, and what the scan does then (pure).

A state is *due* (:func:`due`) when its open session has been idle for the idle
timeout, when it is closed with a closing event still in its outbox for the
resend interval, or when it is closed, empty and quiet for the retention. For
a fixed state that only grows more true as time passes, so each state has a
moment from which it is due (:func:`due_from`), and a scan needs to look at a
state only from then on: the scanner keeps states ordered by that moment
instead of reading every state on every tick.

At a look (:func:`look`) a due state gets a check unless one was sent for the
same session and activity within the resend interval; a state seen not due
forgets what was sent for it. Moments are given a hair early (one float step)
and :func:`due` decides: the order never makes a check late.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

Sent = tuple[int, float, float]  # session_seq, last_seen_at, sent at


@dataclass(frozen=True)
class IdleTimes:
    timeout_s: float  # an open session idle this long is due
    resend_after_s: float  # a closing event unsent, or a check unanswered, this long
    retention_s: float = math.inf  # a closed, empty state quiet this long leaves the table


class Watch(NamedTuple):
    """What the scan needs of one session state (a tuple: cheap to make by the
    hundred thousand when a table is read whole)."""

    tenant_id: str
    conversation_id: str
    session_seq: int
    last_seen_at: float
    open: bool
    outbox: bool  # a closing event not yet published


@dataclass(frozen=True, slots=True)
class Look:
    """What one look at a state decided: send a check or not, what is remembered as
    sent (None: nothing), and when to look again (None: only once the state changes)."""

    send: bool
    sent: Sent | None
    next_at: float | None


def watch_of(value: Mapping[str, Any] | None) -> Watch | None:
    """The fields of a sessions-table value the scan reads (as
    :meth:`~streams.session.model.SessionState.from_table` reads them)."""
    if value is None:
        return None
    return Watch(value["tenant_id"], value["conversation_id"],
                 int(value.get("session_seq", 1)), float(value.get("last_seen_at", 0.0)),
                 bool(value.get("open", False)), bool(value.get("outbox")))


def due(w: Watch, now: float, t: IdleTimes) -> bool:
    quiet = now - w.last_seen_at
    if w.open:
        return quiet >= t.timeout_s
    if w.outbox:
        return quiet >= t.resend_after_s
    return quiet >= t.retention_s


def due_from(w: Watch, t: IdleTimes) -> float | None:
    """A moment at or before the first one :func:`due` holds from; None: never."""
    wait = t.timeout_s if w.open else t.resend_after_s if w.outbox else t.retention_s
    return _early(w.last_seen_at + wait)


def look(w: Watch, sent: Sent | None, now: float, t: IdleTimes) -> Look:
    """One look at ``w`` at ``now``, ``sent``: what was remembered as sent for it."""
    if not due(w, now, t):
        return Look(False, None, due_from(w, t))
    if sent is not None and sent[:2] == (w.session_seq, w.last_seen_at) and (
            now - sent[2] < t.resend_after_s):
        return Look(False, sent, _early(sent[2] + t.resend_after_s))
    return Look(True, (w.session_seq, w.last_seen_at, now), _early(now + t.resend_after_s))


def _early(at: float) -> float | None:
    return math.nextafter(at, -math.inf) if math.isfinite(at) else None
