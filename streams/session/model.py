"""Per-conversation session state, as held in the Faust ``sessions`` table.

Pure transitions: the caller passes the event, where it came from and the
current time. Replays are idempotent because each state remembers the highest
source offset it applied per topic (a conversation always lives in one
partition of each co-partitioned topic), and events at or below it are
ignored.

Two rules make session ends durable and sessions exact:

* **Outbox.** Closing a session puts its :class:`SessionClosed` event in the
  state's ``outbox``; the event leaves the outbox only once it was published
  (:meth:`SessionState.sent`). The state that says "closed" and the event
  that announces it are therefore one table record: whenever the state is
  written, a crash before the publish leaves the event to be published the
  next time the state is touched (a redelivered event, or an idle check).
* **Stamp.** Every message belongs to the session that is current at its
  place in the partition: :attr:`SessionState.session_seq` for a message
  applied now (a closed session already moved it on); for a message at an
  offset the state has passed — delivered again after records were passed
  over — the session that was current there (:meth:`SessionState.session_of`,
  from the offsets each close left in ``bounds``). The ingest processor stores
  that number with the message, and a session's consolidation takes exactly
  the messages stamped with it. A message whose session was closed already
  is *late*: :meth:`SessionState.late` puts a closing event for it in the
  outbox, and its consolidation takes the session's messages no run took.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from streams.wire.records import TRACE_LINKS_KEPT, ChatMessage, SessionClosed, SessionEnd

# A message as the Redis list, the message store and the Session window carry it
# (the fields of :func:`streams.ingest.model.row_to_doc`).
MessageDoc = dict[str, Any]
ConversationKey = tuple[str, str]  # (tenant_id, conversation_id)


@dataclass(frozen=True, slots=True)
class StaleMark:
    """The durable mark of a conversation whose cached list may miss stored messages;
    every new mark of it gets a new ``mark_id`` (a clear compares on it)."""

    tenant_id: str
    conversation_id: str
    mark_id: int

    @property
    def key(self) -> ConversationKey:
        return (self.tenant_id, self.conversation_id)


@dataclass(frozen=True)
class ConversationSummary:
    """A conversation's stored summary, and the messages it covers."""

    text: str
    covered_until_id: int
    covered_count: int
    token_count: int
    updated_at: datetime

TABLE_KEY_SEP = "/"
BOUNDS_KEPT = 4  # session starts remembered per source topic


def table_key(tenant_id: str, conversation_id: str) -> str:
    """Key of the sessions table; tenant ids cannot contain ``/`` (schema pattern)."""
    return f"{tenant_id}{TABLE_KEY_SEP}{conversation_id}"


def split_table_key(key: str) -> tuple[str, str]:
    tenant, _, conversation = key.partition(TABLE_KEY_SEP)
    return tenant, conversation


SPEAKERS_KEPT = 8  # speakers before the current one a state remembers


def _renamed(doc: str, user_id: str, state: SessionState) -> str:
    """A closing event (JSON) still to publish, naming the state's speaker instead of
    the erased ``user_id`` (and its last event)."""
    closed = json.loads(doc)
    if closed.get("user_id") != user_id or state.user_id == user_id:
        return doc
    closed.update(user_id=state.user_id, agent_id=state.agent_id,
                  last_event_id=state.last_event_id)
    return json.dumps(closed, separators=(",", ":"))


def _ts(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


@dataclass(slots=True)
class SessionState:
    """Plain dataclass: a batch (de)serialises hundreds of these, so no validation layer."""

    tenant_id: str
    user_id: str
    agent_id: str
    conversation_id: str
    message_count: int = 0
    session_seq: int = 1
    session_message_count: int = 0
    session_bytes: int = 0  # UTF-8 bytes of the open session's message texts
    unsummarized_count: int = 0
    first_activity: datetime | None = None
    last_activity: datetime | None = None
    last_seen_at: float = 0.0
    open: bool = False
    offsets: dict[str, int] = field(default_factory=dict)
    last_event_id: str | None = None
    outbox: list[str] = field(default_factory=list)  # SessionClosed JSON, not yet published
    # per source topic, [first offset, session] of the newest sessions' starts
    bounds: dict[str, list[list[int]]] = field(default_factory=dict)
    session_start: datetime | None = None  # event time of the open session's first message
    session_last: datetime | None = None  # and of its newest one: the gap is measured from it
    # messages older than this belong to the session before (closed by a later
    # event's gap, or by a session end), see belongs_to_previous
    previous_until: datetime | None = None
    stream_time: datetime | None = None  # the newest event time (messages and ends)
    # [user, agent, last event id] of the speakers before the current one, the newest
    # last (a group chat; at most SPEAKERS_KEPT): what the state names when the
    # current speaker is erased
    previous_speakers: list[list[str]] = field(default_factory=list)
    trace_links: list[str] = field(default_factory=list)  # the open session's sampled traces

    def session_of(self, source: str, offset: int) -> int:
        """The session current at ``offset`` of ``source``."""
        starts = self.bounds.get(source)
        if not starts:
            return self.session_seq
        for first, seq in reversed(starts):
            if offset >= first:
                return seq
        return starts[0][1] - 1

    def seen(self, source: str, offset: int) -> bool:
        return offset <= self.offsets.get(source, -1)

    def mark(self, source: str, offset: int) -> None:
        if offset > self.offsets.get(source, -1):
            self.offsets[source] = offset

    @property
    def session_last_activity(self) -> datetime | None:
        """The open session's newest event time (a state written before it was
        kept has only the conversation's)."""
        return self.session_last or self.last_activity

    def closes_by_gap(self, at: datetime, gap_s: float) -> bool:
        """An event at ``at`` (event time) ``gap_s`` or more after the open
        session's last activity: that session ended before it (stream time, as
        a session window does), whatever the wall clock says."""
        last = self.session_last_activity
        return (self.open and last is not None
                and (at.astimezone(UTC) - last).total_seconds() >= gap_s)

    def belongs_to_previous(self, at: datetime, grace_s: float) -> bool:
        """An out-of-order message of the session before: older than the open
        session's first message (if one is open), older than where the session
        before ended (its last activity plus the gap when a later event's gap
        closed it, the session end's time when an end did), and at most
        ``grace_s`` behind stream time. A session the wall-clock scan closed
        takes nothing more: live, the next message starts a session."""
        if self.previous_until is None or self.stream_time is None:
            return False
        at = at.astimezone(UTC)
        if self.open and self.session_start is not None and at >= self.session_start:
            return False
        return at < self.previous_until and (self.stream_time - at).total_seconds() <= grace_s

    def observe(self, at: datetime) -> None:
        """Move stream time on to ``at`` (a message's or a session end's time)."""
        at = at.astimezone(UTC)
        if self.stream_time is None or at > self.stream_time:
            self.stream_time = at

    def apply_message(self, msg: ChatMessage, source: str, offset: int, now: float,
                      *, previous: bool = False, traceparent: str | None = None) -> bool:
        """Count one stored message (``previous``: in the session before the open
        one, see :meth:`belongs_to_previous`); False when this offset was applied
        before. ``traceparent``: its record's sampled trace, which the session's
        closing event names (the newest ``TRACE_LINKS_KEPT``)."""
        if self.seen(source, offset):
            return False
        self.mark(source, offset)
        self.message_count += 1
        ts = msg.created_at.astimezone(UTC)
        self.observe(ts)
        if previous:
            self.first_activity = min(self.first_activity or ts, ts)
            self.last_seen_at = max(self.last_seen_at, now)
            return True
        if self.user_id and msg.user_id != self.user_id:
            kept = [p for p in self.previous_speakers if p[0] not in (self.user_id, msg.user_id)]
            kept.append([self.user_id, self.agent_id, self.last_event_id or ""])
            self.previous_speakers = kept[-SPEAKERS_KEPT:]
        self.user_id, self.agent_id = msg.user_id, msg.agent_id
        if self.session_message_count == 0 or self.session_start is None:
            self.session_start = self.session_last = ts
        else:
            self.session_start = min(self.session_start, ts)
            self.session_last = max(self.session_last or ts, ts)
        self.session_message_count += 1
        self.session_bytes += len(msg.content.encode("utf-8"))
        self.unsummarized_count += 1
        if self.first_activity is None or ts < self.first_activity:
            self.first_activity = ts
        if self.last_activity is None or ts > self.last_activity:
            self.last_activity = ts
        self.last_seen_at = max(self.last_seen_at, now)
        self.last_event_id = msg.event_id
        self.open = True
        if traceparent is not None:
            self.trace_links = [*self.trace_links, traceparent][-TRACE_LINKS_KEPT:]
        return True

    def close(
        self,
        trigger: Literal["explicit", "idle"],
        now: float,
        end: SessionEnd | None = None,
        *,
        next_from: tuple[str, int] | None = None,
        previous_until: datetime | None = None,
    ) -> SessionClosed | None:
        """Close the current session; None when it holds no message (nothing to
        consolidate). ``next_from``: the source and offset of the later event
        whose time closed it (the gap in event time), where the next session
        starts; ``previous_until``: out-of-order messages older than this may
        still join the closed session (:meth:`belongs_to_previous`)."""
        if not self.open or self.session_message_count == 0:
            return None
        self.previous_until = previous_until.astimezone(UTC) if previous_until else None
        session_last = self.session_last_activity
        self.session_start = self.session_last = None
        closed = SessionClosed(
            closed_id=f"{self.tenant_id}/{self.conversation_id}#{self.session_seq}",
            tenant_id=self.tenant_id,
            user_id=end.user_id if end else self.user_id,
            agent_id=end.agent_id if end else self.agent_id,
            conversation_id=self.conversation_id,
            trigger=trigger,
            session_seq=self.session_seq,
            closed_at=datetime.fromtimestamp(now, UTC),
            last_activity=session_last or datetime.fromtimestamp(now, UTC),
            message_count=self.session_message_count,
            last_event_id=self.last_event_id,
            trace_links=self.trace_links,
        )
        self.trace_links = []
        self.session_seq += 1
        self.session_message_count = 0
        self.session_bytes = 0
        self.open = False
        firsts = {source: last + 1 for source, last in self.offsets.items()}
        if next_from is not None:  # the next session starts with the event that closed this one
            firsts[next_from[0]] = next_from[1]
        for source, first in firsts.items():
            starts = self.bounds.setdefault(source, [])
            starts.append([first, self.session_seq])
            del starts[:-BOUNDS_KEPT]
        self.outbox.append(closed.model_dump_json())
        return closed

    def late(self, session_seq: int, source: str, offset: int, now: float,
             message: ChatMessage, *, trace_links: list[str] | None = None) -> SessionClosed:
        """A closing event for messages of the closed session ``session_seq``
        delivered after it closed (the first of them at ``source``/``offset``; their
        sampled traces ``trace_links``); put in the outbox like any closing event."""
        mark = hashlib.sha1(f"{source}:{offset}".encode()).hexdigest()[:12]
        closed = SessionClosed(
            closed_id=f"{self.tenant_id}/{self.conversation_id}#{session_seq}~{mark}",
            tenant_id=self.tenant_id, user_id=message.user_id, agent_id=message.agent_id,
            conversation_id=self.conversation_id, trigger="late", session_seq=session_seq,
            closed_at=datetime.fromtimestamp(now, UTC),
            last_activity=message.created_at.astimezone(UTC), message_count=0,
            trace_links=(trace_links or [])[-TRACE_LINKS_KEPT:],
        )
        self.outbox.append(closed.model_dump_json())
        return closed

    def pending(self) -> list[SessionClosed]:
        """Closing events not yet published."""
        return [SessionClosed.model_validate_json(doc) for doc in self.outbox]

    def sent(self, closed_ids: set[str]) -> bool:
        """Drop published events from the outbox; True when anything changed."""
        kept = [doc for doc in self.outbox
                if SessionClosed.model_validate_json(doc).closed_id not in closed_ids]
        changed = len(kept) != len(self.outbox)
        self.outbox = kept
        return changed

    def expired(self, now: float, retention_s: float) -> bool:
        """Closed, nothing left to publish, and no event for ``retention_s``: the
        state may leave the table (the session numbers go on from the stamps
        stored with the messages, see :meth:`new`)."""
        return (not self.open and not self.outbox
                and now - self.last_seen_at >= retention_s)

    def brought_forward(self, last_session_seq: int) -> SessionState:
        """This state numbers its sessions at or below ``last_session_seq``, the last
        session remembered when the conversation's state was dropped: it is a stale
        copy (kept by a worker after its partition moved away, come back after the
        state was dropped elsewhere). Nothing of it is kept — not its user, its
        outbox or its offsets: the state :meth:`new` makes for the conversation,
        numbering on from ``last_session_seq`` (its ids set by its next message)."""
        return SessionState(tenant_id=self.tenant_id, user_id="", agent_id="",
                            conversation_id=self.conversation_id,
                            session_seq=last_session_seq + 1)

    def forget_speaker(self, user_id: str) -> bool:
        """An erasure of ``user_id``: the state names them no more — not as the
        current speaker (the newest speaker before them takes their place, with
        their agent and last event), not among the speakers before, not in a
        closing event still to publish (it names the state's speaker instead).
        False when nothing changed, or when no other speaker is known (a
        conversation only they spoke in goes whole)."""
        before = len(self.previous_speakers)
        self.previous_speakers = [p for p in self.previous_speakers if p[0] != user_id]
        changed = len(self.previous_speakers) != before
        if self.user_id == user_id:
            if not self.previous_speakers:
                return changed
            self.user_id, self.agent_id, last = self.previous_speakers.pop()
            self.last_event_id = last or None
            changed = True
        outbox = [_renamed(doc, user_id, self) for doc in self.outbox]
        changed = changed or outbox != self.outbox
        self.outbox = outbox
        return changed

    def idle_for(self, now: float) -> float:
        return now - self.last_seen_at if self.open else 0.0

    def to_table(self) -> dict[str, Any]:
        return {
            "tenant_id": self.tenant_id,
            "user_id": self.user_id,
            "agent_id": self.agent_id,
            "conversation_id": self.conversation_id,
            "message_count": self.message_count,
            "session_seq": self.session_seq,
            "session_message_count": self.session_message_count,
            "session_bytes": self.session_bytes,
            "unsummarized_count": self.unsummarized_count,
            "first_activity": self.first_activity.isoformat() if self.first_activity else None,
            "last_activity": self.last_activity.isoformat() if self.last_activity else None,
            "last_seen_at": self.last_seen_at,
            "open": self.open,
            "offsets": dict(self.offsets),
            "last_event_id": self.last_event_id,
            "outbox": list(self.outbox),
            "bounds": {k: [list(b) for b in v] for k, v in self.bounds.items()},
            "session_start": self.session_start.isoformat() if self.session_start else None,
            "session_last": self.session_last.isoformat() if self.session_last else None,
            "previous_until": self.previous_until.isoformat() if self.previous_until else None,
            "stream_time": self.stream_time.isoformat() if self.stream_time else None,
            "previous_speakers": [list(p) for p in self.previous_speakers],
            **({"trace_links": list(self.trace_links)} if self.trace_links else {}),
        }

    @classmethod
    def from_table(cls, value: dict[str, Any] | None) -> SessionState | None:
        if value is None:
            return None
        return cls(
            tenant_id=value["tenant_id"],
            user_id=value["user_id"],
            agent_id=value["agent_id"],
            conversation_id=value["conversation_id"],
            message_count=int(value.get("message_count", 0)),
            session_seq=int(value.get("session_seq", 1)),
            session_message_count=int(value.get("session_message_count", 0)),
            session_bytes=int(value.get("session_bytes", 0)),
            unsummarized_count=int(value.get("unsummarized_count", 0)),
            first_activity=_ts(value.get("first_activity")),
            last_activity=_ts(value.get("last_activity")),
            last_seen_at=float(value.get("last_seen_at", 0.0)),
            open=bool(value.get("open", False)),
            offsets={str(k): int(v) for k, v in (value.get("offsets") or {}).items()},
            last_event_id=value.get("last_event_id"),
            outbox=[str(doc) for doc in value.get("outbox") or ()],
            bounds={str(k): [[int(b[0]), int(b[1])] for b in v]
                    for k, v in (value.get("bounds") or {}).items()},
            session_start=_ts(value.get("session_start")),
            session_last=_ts(value.get("session_last")),
            previous_until=_ts(value.get("previous_until")),
            stream_time=_ts(value.get("stream_time")),
            previous_speakers=[[str(v) for v in p]
                               for p in value.get("previous_speakers") or ()],
            trace_links=[str(t) for t in value.get("trace_links") or ()][-TRACE_LINKS_KEPT:],
        )

    @classmethod
    def new(cls, event: ChatMessage | SessionEnd, last_session_seq: int = 0) -> SessionState:
        """The state of a conversation the table does not hold: new, or one whose
        state left the table; ``last_session_seq`` is the highest session number
        stored with its messages (0 for none), and numbering goes on from it."""
        return cls(
            tenant_id=event.tenant_id,
            user_id=event.user_id,
            agent_id=event.agent_id,
            conversation_id=event.conversation_id,
            session_seq=last_session_seq + 1,
        )
