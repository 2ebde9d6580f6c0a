"""IdleScanner: finds idle sessions in this worker's part of the sessions table.

Faust forbids table writes outside stream iteration, so the scan itself never
closes anything: it returns :class:`~streams.records.IdleCheck` records, which
the caller publishes to the idle-check topic (keyed by conversation, so they
land on the partition that owns the conversation's state). The ingest agent
consumes that topic and re-checks the state before closing the session.

A check is sent once per idle session: the scanner remembers what it sent
(session number and last activity) and sends again only if the session moved
on, or after ``resend_after_s`` when the first check may have been lost (a
rebalance, say). Sending twice is harmless: the ingest agent closes a session
once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from streams.domain.session_state import SessionState
from streams.publish import Outgoing
from streams.records import IdleCheck

_Sent = tuple[int, float, float]  # session_seq, last_seen_at, sent at


class IdleScanner:
    def __init__(
        self,
        *,
        timeout_s: float,
        resend_after_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.timeout_s = timeout_s
        self.resend_after_s = resend_after_s
        self.clock = clock
        self._sent: dict[str, _Sent] = {}
        self.open_sessions = 0

    def scan(self, items: Iterable[tuple[str, dict[str, Any] | None]]) -> list[IdleCheck]:
        """Idle checks for the open sessions idle for at least ``timeout_s``."""
        now = self.clock()
        checks: list[IdleCheck] = []
        seen: set[str] = set()
        open_sessions = 0
        for key, value in items:
            state = SessionState.from_table(value) if value is not None else None
            if state is None or not state.open:
                continue
            open_sessions += 1
            idle = state.idle_for(now)
            if idle < self.timeout_s:
                continue
            seen.add(key)
            sent = self._sent.get(key)
            if sent is not None and sent[:2] == (state.session_seq, state.last_seen_at) and (
                now - sent[2] < self.resend_after_s
            ):
                continue
            self._sent[key] = (state.session_seq, state.last_seen_at, now)
            checks.append(IdleCheck(
                tenant_id=state.tenant_id,
                conversation_id=state.conversation_id,
                session_seq=state.session_seq,
                idle_for_s=round(idle, 3),
                checked_at=datetime.fromtimestamp(now, UTC),
            ))
        # forget sessions that closed or became active again
        for key in [k for k in self._sent if k not in seen]:
            del self._sent[key]
        self.open_sessions = open_sessions
        return checks


def idle_check_record(topic: str, check: IdleCheck) -> Outgoing:
    """The check as a record keyed like the chat topic (by conversation id)."""
    return Outgoing(topic, check.conversation_id.encode(), check.model_dump_json().encode())
