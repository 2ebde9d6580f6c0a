"""What one ingest batch does to the session states: pure, before anything is stored.

:func:`plan_sessions` walks the batch's events in order over the current
states and returns, without touching any store:

* the session number each chat message belongs to (its **stamp**, stored with
  the message, so a session's consolidation takes exactly its own messages,
  whenever they were stored) — for a message at an offset the state passed,
  the session current there; those of a closed session are *late candidates*
  (the processor sends a late closing event for the ones that were not stored
  before);
* the new states, to be written to the sessions table once the messages are
  stored;
* sessions cut by size: a session that reaches ``max_messages`` messages or
  ``max_bytes`` of text is closed right after the message that reached it, as
  by a session end (``plan.cut`` says whose and which bound), and the next
  message opens a new session;
* the closing events to publish: sessions closed by this batch, and any event
  still in the outbox of a state the batch touched (a crash after the state
  was written and before its event was published leaves it there);
* the states to drop from the table (closed, published, and quiet for the
  retention), each with the last closed session number to remember durably;
  a state numbering at or below the number remembered is a stale copy and is
  brought forward first (its sessions' numbers were used already).

Idle checks (from the session scan) are re-checked here: a message may have
arrived since the scan. A session end of an erased user arrives as a
:class:`BareEnd`: it closes the open session and nothing more.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from streams.session.model import SessionState, table_key
from streams.wire.records import ChatMessage, IdleCheck, SessionClosed, SessionEnd


@dataclass(frozen=True, slots=True)
class BareEnd:
    """A session end whose sender an erasure of that user covers, stripped of its
    sender: it closes the conversation's open session (for the users left) under
    the ids the state holds, as an idle close would, and carries nothing of its
    own — no agent or time; the state forgets its sender (when they spoke last, it
closes under the speaker before them). It never starts a state: a conversation with no
    state (one only the erased user spoke in, whose state the erasure deleted)
    has no session to close."""

    tenant_id: str
    conversation_id: str
    erased_user: str = ""  # the sender: the state names them no more (forget_speaker)


Event = ChatMessage | SessionEnd | IdleCheck | BareEnd


@dataclass(frozen=True, slots=True)
class SourcedEvent:
    """An event with the topic and offset it was read from."""

    topic: str
    offset: int
    event: Event
    traceparent: str | None = None  # its record's, when that trace is sampled


@dataclass
class SessionPlan:
    stamps: dict[int, int] = field(default_factory=dict)  # item index -> session_seq
    states: dict[str, SessionState] = field(default_factory=dict)
    last_item: dict[str, int] = field(default_factory=dict)  # key -> index of its last event
    closed: list[SessionClosed] = field(default_factory=list)  # closed by this batch
    causes: dict[str, int] = field(default_factory=dict)  # closed_id -> the item closing it
    publish: list[SessionClosed] = field(default_factory=list)  # everything to (re)publish
    expired: dict[str, int] = field(default_factory=dict)  # key -> last closed session
    outcomes: dict[int, str] = field(default_factory=dict)  # item index -> tally outcome
    # key -> closed session -> its late candidates (item indexes, in order): messages
    # of a session closed before they came (passed over, delivered again, out of
    # order), or redeliveries of stored ones
    late: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    # conversations with no history before this batch, as (tenant, conversation)
    fresh: set[tuple[str, str]] = field(default_factory=set)
    cut: list[tuple[str, str]] = field(default_factory=list)  # (tenant, bound) per size cut


@dataclass(frozen=True)
class SessionRules:
    idle_timeout_s: float  # the gap, in event time (and in wall-clock time for the scan)
    retention_s: float
    grace_s: float = 0.0  # how far behind stream time an out-of-order message may be
    max_messages: int | None = None  # a session this long is closed (None: no bound)
    max_bytes: int | None = None  # ... and one with this much text

    def reached(self, state: SessionState) -> str | None:
        """The size bound the open session of ``state`` reached (``messages``,
        ``bytes``), if any."""
        if not state.open:
            return None
        if self.max_messages is not None and state.session_message_count >= self.max_messages:
            return "messages"
        if self.max_bytes is not None and state.session_bytes >= self.max_bytes:
            return "bytes"
        return None


def plan_sessions(
    events: Sequence[SourcedEvent],
    current: Callable[[str], dict[str, object] | None],
    last_closed: Mapping[str, int],
    now: float,
    rules: SessionRules,
    durable: Callable[[SessionState], bool] = lambda state: True,
) -> SessionPlan:
    """See the module docstring. ``current(key)`` reads a state as the table holds
    it; ``last_closed`` gives, for conversations the table does not hold or holds
    quiet for the retention, the last session number remembered when their state
    was dropped (a state numbering at or below it is a stale copy, brought forward:
    :meth:`SessionState.brought_forward`). ``durable(state)``: every record applied
    to the state is committed — only then may it leave the table (a record
    delivered again would otherwise meet no state and start a session anew)."""
    plan = SessionPlan()
    for i, item in enumerate(events):
        ev = item.event
        key = table_key(ev.tenant_id, ev.conversation_id)
        state = plan.states.get(key)
        if state is None:
            state = SessionState.from_table(current(key))
            if state is not None and state.session_seq <= last_closed.get(key, 0):
                state = state.brought_forward(last_closed[key])  # a stale copy
            if state is None:
                if isinstance(ev, IdleCheck):  # not this worker's, or long gone
                    plan.outcomes[i] = "idle_unknown"
                    continue
                if isinstance(ev, BareEnd):  # nothing open, nothing of it kept
                    plan.outcomes[i] = "erased"
                    continue
                state = SessionState.new(ev, last_closed.get(key, 0))
                if key not in last_closed:
                    plan.fresh.add((ev.tenant_id, ev.conversation_id))
            elif state.message_count == 0:
                plan.fresh.add((ev.tenant_id, ev.conversation_id))
            plan.states[key] = state
        plan.last_item[key] = i
        if not isinstance(ev, IdleCheck | BareEnd):
            plan.expired.pop(key, None)  # active again after all
        if isinstance(ev, ChatMessage):
            if state.seen(item.topic, item.offset):  # passed over before, or a redelivery
                plan.stamps[i] = state.session_of(item.topic, item.offset)
                if plan.stamps[i] < state.session_seq:
                    plan.late.setdefault(key, {}).setdefault(plan.stamps[i], []).append(i)
            elif state.belongs_to_previous(ev.created_at, rules.grace_s):
                plan.stamps[i] = state.session_seq - 1
                plan.late.setdefault(key, {}).setdefault(plan.stamps[i], []).append(i)
                state.apply_message(ev, item.topic, item.offset, now, previous=True,
                                    traceparent=item.traceparent)
            else:
                _gap(plan, state, item, i, now, rules)
                plan.stamps[i] = state.session_seq
                state.apply_message(ev, item.topic, item.offset, now,
                                    traceparent=item.traceparent)
                bound = rules.reached(state)
                if bound is not None and _closed(plan, state.close("explicit", now), i):
                    plan.cut.append((ev.tenant_id, bound))
        elif isinstance(ev, SessionEnd):
            plan.outcomes[i] = "session_end"
            if not state.seen(item.topic, item.offset):
                _gap(plan, state, item, i, now, rules)
                state.mark(item.topic, item.offset)
                state.observe(ev.created_at)
                _closed(plan, state.close("explicit", now, ev, previous_until=ev.created_at), i)
        elif isinstance(ev, BareEnd):
            plan.outcomes[i] = "session_end"
            if not state.seen(item.topic, item.offset):
                state.mark(item.topic, item.offset)
                state.forget_speaker(ev.erased_user)
                _closed(plan, state.close("explicit", now), i)
        else:
            plan.outcomes[i] = _idle(plan, state, item, i, now, rules, durable)
            if plan.outcomes[i] == "idle_expired":
                plan.expired[key] = state.session_seq - 1
    seen: set[str] = set()
    for key, state in plan.states.items():
        if key in plan.expired:
            continue
        for closed in state.pending():
            if closed.closed_id not in seen:
                seen.add(closed.closed_id)
                plan.publish.append(closed)
    return plan


def _gap(plan: SessionPlan, state: SessionState, item: SourcedEvent, i: int, now: float,
         rules: SessionRules) -> None:
    """An event whose time is a gap after the open session's last activity
    closes that session first (trigger ``idle``: it went idle in event time), so
    that a replay in one burst makes the sessions the live traffic made."""
    assert not isinstance(item.event, IdleCheck | BareEnd)
    if state.closes_by_gap(item.event.created_at, rules.idle_timeout_s):
        last = state.session_last_activity
        assert last is not None
        until = last + timedelta(seconds=rules.idle_timeout_s)
        _closed(plan, state.close("idle", now, next_from=(item.topic, item.offset),
                                  previous_until=until), i)


def _closed(plan: SessionPlan, closed: SessionClosed | None, cause: int) -> bool:
    """``closed`` (when a session closed) is the plan's, closed by item ``cause``."""
    if closed is None:
        return False
    plan.closed.append(closed)
    plan.causes[closed.closed_id] = cause
    return True


def _idle(plan: SessionPlan, state: SessionState, item: SourcedEvent, i: int, now: float,
          rules: SessionRules, durable: Callable[[SessionState], bool]) -> str:
    """Close the session if it is still open and idle (the scan may be stale); a
    closed state quiet for the retention, whose records are all committed, expires."""
    if state.seen(item.topic, item.offset):
        return "idle_replayed"
    state.mark(item.topic, item.offset)
    if not state.open:
        if state.expired(now, rules.retention_s):
            return "idle_expired" if durable(state) else "idle_uncommitted"
        return "idle_outbox" if state.outbox else "idle_active"
    if state.idle_for(now) < rules.idle_timeout_s:
        return "idle_active"
    return "idle_closed" if _closed(plan, state.close("idle", now), i) else "idle_active"
