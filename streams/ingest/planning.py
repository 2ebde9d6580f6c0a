"""Planning: a batch's session transitions, and staging them once the messages are stored.

The plan (:mod:`streams.session.rules.batch`) stamps each message with the
session it belongs to and closes sessions on ``session_end``, on an event
``idle_timeout_s`` or more after the session's last activity (event time), and
on an idle check still due; states closed and quiet for ``closed_retention_s``
are dropped once every record applied to them is committed (one delivered
again must find its state). It is made over the states as the table holds
them; a conversation the table does not hold is looked up in the database (a state
dropped after the retention left its last session number there), and so is
one it holds quiet for the retention: a stale copy of a state dropped
elsewhere numbers at or below that number, and is brought forward.

Once the messages are stored, the planned states are staged
(:class:`~streams.session.state_buffer.SessionStateBuffer`) and the stored
messages sorted for the cache; a message of a closed session stored only now
gets its session a late closing event.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import cast

from streams import tracing
from streams.backoff import retry_forever
from streams.ingest.model import (
    EventKey,
    IngestConfig,
    IngestResult,
    MessageRow,
    Taken,
    Tally,
    row_to_doc,
)
from streams.ingest.ports import ClosedSessions
from streams.ingest.publishing import ClosingEvents
from streams.metrics import SESSION_STATES_DROPPED, SESSIONS_CLOSED, SESSIONS_CUT
from streams.session.model import ConversationKey, MessageDoc, SessionState, table_key
from streams.session.rules.batch import (
    BareEnd,
    SessionPlan,
    SessionRules,
    SourcedEvent,
    plan_sessions,
)
from streams.session.state_buffer import SessionStateBuffer
from streams.wire.envelope import SourceRecord
from streams.wire.records import ChatMessage, IdleCheck


class SessionPlanning:
    def __init__(self, config: IngestConfig, states: SessionStateBuffer,
                 closed: ClosedSessions, outbox: ClosingEvents, *,
                 clock: Callable[[], float], home: Callable[[str], int] | None = None) -> None:
        self.config = config
        self.states = states
        self.closed = closed
        self.outbox = outbox
        self.home = home
        self.committed: Callable[[str, int], int | None] | None = None
        """``(topic, partition)`` -> the committed offset (the next to read), None when
        unknown; set by the worker. Unset: every record counts as committed."""
        self.clock = clock

    async def plan(self, items: Sequence[Taken]) -> SessionPlan:
        """The batch's session transitions, over the states as the table holds
        them; conversations it does not hold are looked up in the database (a
        state dropped after the retention left its last session number there)."""
        await self.outbox.wait({table_key(i.event.tenant_id, i.event.conversation_id)
                                for i in items})
        current = {}
        for i in items:
            key = table_key(i.event.tenant_id, i.event.conversation_id)
            if key not in current:
                current[key] = self.states.get(key)
        now = self.clock()
        unknown = {(i.event.tenant_id, i.event.conversation_id) for i in items
                   if not isinstance(i.event, IdleCheck | BareEnd)
                   and current[table_key(i.event.tenant_id, i.event.conversation_id)] is None}
        # a state quiet for the retention may be a stale copy of one dropped elsewhere:
        # its numbers are checked against the database too
        unknown |= {(i.event.tenant_id, i.event.conversation_id) for i in items
                    if (held := current[table_key(i.event.tenant_id, i.event.conversation_id)])
                    is not None and now - float(cast(float, held.get("last_seen_at", 0.0)))
                    >= self.config.closed_retention_s}

        async def lookup() -> dict[ConversationKey, int]:
            return await self.closed.last_closed_sessions(sorted(unknown))

        last = await retry_forever(lookup, what="mysql", initial_s=self.config.retry_initial_s,
                                   max_s=self.config.retry_max_s) if unknown else {}
        events = [SourcedEvent(i.record.topic, i.record.offset, i.event,
                               tracing.traceparent_of(i.record.headers)) for i in items]
        rules = SessionRules(self.config.idle_timeout_s, self.config.closed_retention_s,
                             self.config.session_grace_s,
                             max_messages=self.config.session_max_messages,
                             max_bytes=self.config.session_max_bytes)
        return plan_sessions(events, current.__getitem__,
                             {table_key(*k): seq for k, seq in last.items()}, now, rules,
                             self.durable)

    def durable(self, state: SessionState) -> bool:
        """Every message and session end applied to ``state`` is committed (idle checks
        aside: one read again finds no state and does nothing)."""
        committed, home = self.committed, self.home
        if committed is None or home is None:
            return True
        partition = home(state.conversation_id)
        for topic, offset in state.offsets.items():
            if topic == self.config.idle_topic:
                continue
            done = committed(topic, partition)
            if done is None or done <= offset:
                return False
        return True

    def apply(
        self,
        items: Sequence[Taken],
        plan: SessionPlan,
        rows: Sequence[MessageRow],
        new_keys: set[EventKey],
        refused: set[int],
        result: IngestResult,
        tally: Tally,
    ) -> tuple[dict[ConversationKey, list[MessageDoc]], set[ConversationKey],
               dict[str, SourceRecord]]:
        """Stage the planned states (now that their messages are stored) and sort
        the stored messages for the cache: appended, or (already stored before: a
        redelivery) the conversation's list invalidated. Returns those and the
        last record of each conversation (its table partition)."""
        docs = {(r["tenant_id"], r["event_id"]): r for r in rows}
        appended: dict[ConversationKey, list[MessageDoc]] = defaultdict(list)
        queued: set[EventKey] = set()  # appended in this batch
        invalidate: set[ConversationKey] = set()
        for i, it in enumerate(items):
            ev, rec = it.event, it.record
            if i in refused:  # dead-lettered, counted there
                continue
            if isinstance(ev, ChatMessage):
                conv = (ev.tenant_id, ev.conversation_id)
                ek = (ev.tenant_id, ev.event_id)
                if ek in queued:  # the same event earlier in this batch: stored once
                    tally.add(rec.topic, "duplicate")
                elif ek in new_keys:
                    queued.add(ek)
                    appended[conv].append(row_to_doc(docs[ek]))
                    tally.add(rec.topic, "stored")
                else:
                    invalidate.add(conv)
                    tally.add(rec.topic, "duplicate")
            elif i in plan.outcomes:
                tally.add(rec.topic, plan.outcomes[i])
        self._late(items, plan, new_keys)
        for closed in plan.closed:
            result.closed.append(closed)
            SESSIONS_CLOSED.labels(closed.trigger).inc()
        for tenant, bound in plan.cut:
            SESSIONS_CUT.labels(tenant, bound).inc()
        # staged: written to the table (a changelog record) at most once per
        # conversation and flush interval, before the batch is acknowledged
        last = {key: items[i].record for key, i in plan.last_item.items()}
        for key, state in plan.states.items():
            if key in plan.expired:
                self.states.stage(key, None, last[key])
                SESSION_STATES_DROPPED.inc()
            else:
                self.states.stage(key, state.to_table(), last[key])
        return appended, invalidate, last

    @staticmethod
    def causes(items: Sequence[Taken], plan: SessionPlan) -> dict[str, SourceRecord]:
        """The record that closed each session the batch closed, by ``closed_id``."""
        return {cid: items[i].record for cid, i in plan.causes.items()}

    def _late(self, items: Sequence[Taken], plan: SessionPlan, new_keys: set[EventKey]) -> None:
        """A message of a closed session stored only now (it was passed over and
        delivered again, or came out of order) gets its session a late closing
        event, in the outbox. Only the late candidates count, each by its first
        copy in the batch: a redelivered copy after the session's end of a
        message stored earlier in the same batch, in its session, is not late;
        nor is a message of a session the same batch closes."""
        first_copy: dict[EventKey, int] = {}
        for i, it in enumerate(items):
            if isinstance(it.event, ChatMessage):
                first_copy.setdefault((it.event.tenant_id, it.event.event_id), i)
        # a session this batch closes goes out after the batch's messages are stored,
        # and takes its late ones with it
        closed_here = {(table_key(c.tenant_id, c.conversation_id), c.session_seq)
                       for c in plan.closed}
        for key, sessions in plan.late.items():
            state = plan.states[key]
            for seq in sorted(sessions):
                if (key, seq) in closed_here:
                    continue
                stored = [i for i in sessions[seq]
                          if isinstance(ev := items[i].event, ChatMessage)
                          and (ek := (ev.tenant_id, ev.event_id)) in new_keys
                          and first_copy[ek] == i]
                if not stored:
                    continue  # a redelivery of what was stored: its session took it
                first = items[stored[0]]
                assert isinstance(first.event, ChatMessage)
                links = [t for j in stored
                         if (t := tracing.traceparent_of(items[j].record.headers)) is not None]
                closed = state.late(seq, first.record.topic, first.record.offset,
                                    self.clock(), first.event, trace_links=links)
                plan.closed.append(closed)
                plan.causes[closed.closed_id] = stored[0]
                plan.publish.append(closed)
