"""IdleScanner: finds idle sessions in this worker's part of the sessions table.

It also finds the states that need the ingest agent for something else: a
closed session whose closing event is still in the state's outbox (a crash
came between writing the state and publishing the event), and a closed
conversation quiet for the retention, which leaves the table.

Faust forbids table writes outside stream iteration, so the scan itself never
closes anything: it returns :class:`~streams.wire.records.IdleCheck` records, which
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

from streams.session.model import SessionState
from streams.wire.envelope import Outgoing
from streams.wire.records import IdleCheck

_Sent = tuple[int, float, float]  # session_seq, last_seen_at, sent at


class IdleScanner:
    def __init__(
        self,
        *,
        timeout_s: float,
        resend_after_s: float,
        retention_s: float = float("inf"),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.timeout_s = timeout_s
        self.resend_after_s = resend_after_s
        self.retention_s = retention_s
        self.clock = clock
        self._sent: dict[str, _Sent] = {}
        self.open_sessions = 0

    def _due(self, state: SessionState, now: float) -> bool:
        if state.open:
            return state.idle_for(now) >= self.timeout_s
        quiet = now - state.last_seen_at
        if state.outbox:
            return quiet >= self.resend_after_s
        return state.expired(now, self.retention_s)

    def scan(self, items: Iterable[tuple[str, dict[str, Any] | None]]) -> list[IdleCheck]:
        """Checks for the open sessions idle for at least ``timeout_s``, the closed
        ones with an unpublished closing event, and the expired ones."""
        now = self.clock()
        checks: list[IdleCheck] = []
        seen: set[str] = set()
        open_sessions = 0
        for key, value in items:
            state = SessionState.from_table(value) if value is not None else None
            if state is None:
                continue
            open_sessions += state.open
            if not self._due(state, now):
                continue
            idle = now - state.last_seen_at
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
