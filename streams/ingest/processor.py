"""IngestProcessor: one batch of chat events into MySQL, Redis and the session table.

Order per batch, and why:

1. decode; bad input is dead-lettered (delivered before anything is acknowledged);
2. sub-agent chat is re-keyed to the parent conversation's topic partition;
3. the session transitions are planned (:mod:`streams.session.rules.batch`):
   each message is stamped with the session it belongs to, sessions close on
   ``session_end``, on an event whose ``created_at`` is ``idle_timeout_s`` or
   more after the session's last activity (event time), and on an idle check
   from the session scan when the state (re-checked: a message may have
   arrived since the scan) is still open and idle for ``idle_timeout_s``;
   states closed and quiet for ``closed_retention_s`` are dropped;
4. the database stores the messages with their stamps (idempotent on event
   id); a transient error is retried with backoff until it passes, so the
   batch is never acknowledged before that; a row the database refuses for
   good is isolated (the batch is split, its batch-mates stored) and
   dead-lettered (:mod:`streams.adapters.db.isolation`); only then are the planned
   states staged;
5. Redis gets one pipeline (an event twice in the batch is appended once); its
   failure is logged and counted and changes nothing above: the touched
   conversations are marked stale in the database (:mod:`streams.session.stale`) before
   the batch is acknowledged; the states are written to the table, closing
   events in their outbox;
6. session-closed events are delivered (after the messages they refer to and
   the states that say closed), then leave the outboxes.

``process`` only returns when all of that is done, and raises nothing but
cancellation: the caller then acknowledges the whole batch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

from streams.adapters.db.isolation import IsolatedWrite, IsolatingWriter
from streams.adapters.db.messages import MessageStore, message_row, row_to_doc
from streams.adapters.redis.conversation_cache import ConversationCache
from streams.backoff import retry_forever
from streams.clock import naive_utc
from streams.erasure.model import ErasureMark
from streams.erasure.rules.coverage import ErasureIndex, EventPlace
from streams.ingest.rules.routing import place
from streams.ingest.rules.subagent import as_parent_message
from streams.metrics import (
    DEAD_LETTERS,
    ERASURE_SKIPPED,
    INGEST_BATCH,
    INGEST_EVENTS,
    SESSION_STATES_DROPPED,
    SESSIONS_CLOSED,
    SINK_FAILURES,
    SINK_LATENCY,
)
from streams.session.model import MessageDoc, SessionState, split_table_key, table_key
from streams.session.rules.batch import SessionPlan, SessionRules, SourcedEvent, plan_sessions
from streams.session.stale import StaleHistories
from streams.session.state_buffer import SessionStateBuffer
from streams.session.table import SessionTable
from streams.stores import CacheUnavailable
from streams.wire.dead_letter import dead_letter
from streams.wire.decode import (
    OUT_OF_RANGE,
    SCHEMA,
    UNSTORABLE,
    Rejected,
    decode_chat_event,
    decode_idle_record,
)
from streams.wire.envelope import Outgoing, Publisher, SourceRecord
from streams.wire.erasure import ErasureFence
from streams.wire.headers import FIRST_READ, ORIGIN_OFFSET, ORIGIN_PARTITION, header
from streams.wire.records import ChatMessage, IdleCheck, SessionClosed, SessionEnd

log = logging.getLogger(__name__)

# an erasure's fence passed by one partition: the fence, the tombstones it wrote
FencePassed = Callable[[ErasureFence, int], Coroutine[Any, Any, None]]
# the conversations a user or conversation erasure takes whole, as stored now
WholeConversations = Callable[[ErasureFence], Coroutine[Any, Any, list[str]]]
NOT_REROUTED = Rejected(
    SCHEMA, "NotRekeyed",
    "the re-key topic carries only sub-agent chat for a parent conversation and chat events "
    "in their conversation's home partition",
)


@dataclass(frozen=True)
class IngestConfig:
    chat_topic: str
    subagent_topic: str
    dlq_topic: str
    session_closed_topic: str
    max_content_bytes: int = 65_536
    retry_initial_s: float = 0.2
    retry_max_s: float = 10.0
    idle_topic: str | None = None
    idle_timeout_s: float = 1800.0
    closed_retention_s: float = 7 * 86400.0
    session_grace_s: float = 300.0
    max_future_s: float = 86400.0


@dataclass
class IngestResult:
    stored: int = 0
    duplicates: int = 0
    dead_lettered: int = 0
    rerouted: int = 0
    dropped: int = 0
    erased: int = 0
    closed: list[SessionClosed] = field(default_factory=list)
    cache_ok: bool = True


class _Tally:
    """Per-batch event counts, added to the metrics once per batch."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = defaultdict(int)

    def add(self, topic: str, outcome: str) -> None:
        self.counts[(topic, outcome)] += 1

    def flush(self) -> None:
        for (topic, outcome), n in self.counts.items():
            INGEST_EVENTS.labels(topic, outcome).inc(n)
        self.counts.clear()


@dataclass
class _Item:
    record: SourceRecord
    event: ChatMessage | SessionEnd | IdleCheck
    origin: str | None = None


class IngestProcessor:
    def __init__(
        self,
        config: IngestConfig,
        store: MessageStore,
        cache: ConversationCache,
        publisher: Publisher,
        table: SessionTable,
        clock: Callable[[], float] = time.time,
        *,
        stale: StaleHistories,
        state_flush_interval_s: float = 0.0,
        home: Callable[[str], int] | None = None,
        erasures: ErasureIndex | None = None,
        fence_passed: FencePassed | None = None,
        whole_conversations: WholeConversations | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.cache = cache
        self.stale = stale
        self.publisher = publisher
        self.table = table
        self.states = SessionStateBuffer(table, interval_s=state_flush_interval_s)
        self.clock = clock
        self.home = home  # a conversation's home partition (None: where the producer put it)
        # events an erasure covers are skipped; its fence tombstones the erased states
        self.erasures = erasures if erasures is not None else ErasureIndex()
        self.fence_passed = fence_passed
        self.whole_conversations = whole_conversations
        # conversation -> done, while an earlier batch's stage two publishes its
        # closing events (they leave the outbox only then)
        self._publishing: dict[str, asyncio.Future[None]] = {}

    async def _deliver(self, records: Sequence[Outgoing], what: str) -> None:
        if records:
            await retry_forever(
                lambda: self.publisher.publish(records), what=what,
                initial_s=self.config.retry_initial_s, max_s=self.config.retry_max_s,
            )

    def _classify(
        self, records: Sequence[SourceRecord], result: IngestResult, tally: _Tally
    ) -> tuple[
        list[_Item], list[Outgoing], list[Outgoing]
    ]:
        cfg = self.config
        items: list[_Item] = []
        dlq: list[Outgoing] = []
        reroute: list[Outgoing] = []
        for rec in records:
            if cfg.idle_topic is not None and rec.topic == cfg.idle_topic:
                check = decode_idle_record(rec.value)
                if isinstance(check, Rejected):
                    dlq.append(self._dead_letter(rec, check, tally))
                elif isinstance(check, IdleCheck):
                    items.append(_Item(rec, check))
                continue  # a fence was taken in before (see _fences)
            decoded = decode_chat_event(rec.value, cfg.max_content_bytes)
            if not isinstance(decoded, Rejected):
                decoded = self._not_ahead(decoded)
            if isinstance(decoded, Rejected):
                dlq.append(self._dead_letter(rec, decoded, tally))
                continue
            if self._erased(decoded, rec):
                tally.add(rec.topic, "erased")
                ERASURE_SKIPPED.labels("ingest").inc()
                result.erased += 1
                continue
            where = place(decoded, internal=rec.topic == cfg.subagent_topic,
                          partition=rec.partition, home=self.home,
                          rekeyed=header(rec.headers, ORIGIN_PARTITION) is not None)
            if where.action == "store":
                items.append(_Item(rec, decoded))
            elif where.action == "store_in_parent":
                assert isinstance(decoded, ChatMessage)
                items.append(_Item(rec, as_parent_message(decoded), origin=decoded.conversation_id))
            elif where.action == "rekey":
                assert where.conversation_id is not None
                reroute.append(Outgoing(
                    cfg.subagent_topic, where.conversation_id.encode(), rec.value,
                    [*rec.headers, (ORIGIN_PARTITION, str(rec.partition).encode()),
                     (ORIGIN_OFFSET, str(rec.offset).encode())],
                    partition=where.partition,
                ))
                # to a parent conversation (sub-agent chat), or to its own home
                tally.add(rec.topic, "rerouted" if where.conversation_id != decoded.conversation_id
                          else "rekeyed")
            elif where.action == "refuse":  # only what this processor re-keyed belongs there
                dlq.append(self._dead_letter(rec, NOT_REROUTED, tally))
            else:
                tally.add(rec.topic, "dropped_subagent")
                result.dropped += 1
        result.dead_lettered = len(dlq)
        result.rerouted = len(reroute)
        return items, dlq, reroute

    def _fences(self, records: Sequence[SourceRecord]) -> list[tuple[SourceRecord, ErasureFence]]:
        """The batch's erasure fences, taken in before anything of the batch is
        classified: from here on, the events they cover are skipped."""
        idle = self.config.idle_topic
        out = []
        for rec in records:
            if rec.topic == idle and (fence := decode_idle_record(rec.value)) is not None \
                    and isinstance(fence, ErasureFence):
                self.erasures.add(ErasureMark(
                    fence.erasure_id, fence.tenant_id, fence.target, fence.subject,
                    naive_utc(fence.cutoff), dict(fence.chat_offsets), seq=fence.seq))
                out.append((rec, fence))
        return out

    def _erased(self, event: ChatMessage | SessionEnd, rec: SourceRecord) -> bool:
        """Whether an erasure covers ``event``: of its subject, and up to its cutoff or
        read below the chat-topic offsets recorded with it."""
        if not len(self.erasures):
            return False
        parent = getattr(event, "parent_conversation_id", None)
        conversations = (event.conversation_id, parent) if parent else (event.conversation_id,)
        return self.erasures.event_covered(event.tenant_id, event.user_id, conversations,
                                           naive_utc(event.created_at),
                                           self._chat_places(rec)) is not None

    def _chat_places(self, rec: SourceRecord) -> list[EventPlace]:
        """Where on the chat topic ``rec`` was read: here, where ingest re-keyed it from,
        where it was first read before a dead letter was re-driven."""
        chat = self.config.chat_topic
        places = [EventPlace(rec.partition, rec.offset)] if rec.topic == chat else []
        for topic, part, offset in ((chat.encode(), header(rec.headers, ORIGIN_PARTITION),
                                     header(rec.headers, ORIGIN_OFFSET)),
                                    tuple(header(rec.headers, h) for h in FIRST_READ)):
            if topic == chat.encode() and part and offset and part.isdigit() \
                    and offset.isdigit():
                places.append(EventPlace(int(part), int(offset)))
        return places

    async def _tombstones(self, fences: Sequence[tuple[SourceRecord, ErasureFence]],
                          ) -> list[tuple[ErasureFence, int]]:
        """Stage the deletes of the sessions-table entries the fences erase that live
        in the fence's partition: every conversation of an erased tenant; the erased
        conversation; the conversations only an erased user spoke in, as the database
        holds them now (everything this partition stored before the fence is in it).
        Each fence with how many it deleted."""
        out = []
        for rec, fence in fences:
            if fence.target == "tenant":
                prefix = table_key(fence.tenant_id, "")
                keys = [k for k in self.states.stored_keys() if k.startswith(prefix)]
            elif fence.target == "conversation":
                keys = [table_key(fence.tenant_id, fence.subject)]
            elif self.whole_conversations is not None:
                lookup = partial(self.whole_conversations, fence)
                keys = [table_key(fence.tenant_id, c) for c in await retry_forever(
                    lookup, what="erasure-fence", initial_s=self.config.retry_initial_s,
                    max_s=self.config.retry_max_s)]
            else:
                keys = []
            mine = [k for k in keys if self.home is None
                    or self.home(split_table_key(k)[1]) == rec.partition]
            gone = [k for k in mine if self.states.get(k) is not None]
            for k in gone:
                self.states.stage(k, None, rec)
            out.append((fence, len(gone)))
        return out

    def _not_ahead(self, event: ChatMessage | SessionEnd) -> ChatMessage | SessionEnd | Rejected:
        """An event dated further ahead of this worker's clock than
        ``max_future_s`` is refused: its time cannot be when it happened."""
        ahead = event.created_at.timestamp() - self.clock()
        if ahead <= self.config.max_future_s:
            return event
        return Rejected(OUT_OF_RANGE, "FutureTime",
                        f"created_at is {ahead:.0f} s ahead of the worker's clock (the limit "
                        f"is MEMSTREAM_INGEST__MAX_FUTURE_S, {self.config.max_future_s:.0f} s)")

    def _dead_letter(self, rec: SourceRecord, rejected: Rejected, tally: _Tally) -> Outgoing:
        DEAD_LETTERS.labels("ingest", rejected.reason).inc()
        tally.add(rec.topic, "dead_lettered")
        return dead_letter(
            rec, dlq_topic=self.config.dlq_topic, stage="ingest", reason=rejected.reason,
            error_class=rejected.error_class, message=rejected.message,
        )

    async def process(self, records: Sequence[SourceRecord]) -> IngestResult:
        """Both stages of one batch; returns when everything is stored."""
        result, tail = await self.store_batch(records)
        await tail
        return result

    async def store_batch(
        self, records: Sequence[SourceRecord]
    ) -> tuple[IngestResult, Coroutine[Any, Any, None]]:
        """Stage one (dead letters, re-routes, MySQL, session state); returns the
        result and stage two (Redis, then session-closed events) still to run.

        A :class:`~streams.worker.batch_sink.BatchSink` runs stage two of this batch
        while stage one of the next batch runs, and acknowledges the batch once
        stage two is done.
        """
        result = IngestResult()
        tally = _Tally()
        INGEST_BATCH.observe(len(records))
        fences = self._fences(records)
        items, dlq, reroute = self._classify(records, result, tally)
        await self._deliver(dlq, "dlq")
        await self._deliver(reroute, "reroute")

        plan = await self._plan(items)
        new_keys, rows, refused = await self._store(items, plan, result, tally)
        result.stored = len(new_keys)
        result.duplicates = len(rows) - len(new_keys)

        appended, invalidate, last = self._apply(items, plan, rows, new_keys, refused, result,
                                                 tally)
        passed = await self._tombstones(fences)
        tally.flush()
        if plan.publish:
            done = asyncio.get_running_loop().create_future()
            for c in plan.publish:
                self._publishing[table_key(c.tenant_id, c.conversation_id)] = done
        return result, self._finish(appended, plan.fresh - invalidate, invalidate, plan, last,
                                    result, passed)

    async def _store(
        self, items: Sequence[_Item], plan: SessionPlan, result: IngestResult, tally: _Tally
    ) -> tuple[set[tuple[str, str]], list[dict[str, Any]], set[int]]:
        """Store the batch's messages, stamped with their sessions: transient
        database errors are retried until they pass; a row the database refuses
        for good is dead-lettered (its batch-mates are stored). Returns the new
        keys, the rows stored (or there already), and the indexes of the items
        refused. The plan is kept as it is: a refused message is counted in its
        session, but no stamp of the others changes."""
        now = datetime.now(UTC)
        indexes: list[int] = []
        rows: list[dict[str, Any]] = []
        for i, it in enumerate(items):
            if isinstance(it.event, ChatMessage):
                indexes.append(i)
                rows.append(message_row(it.event, now, it.origin, plan.stamps[i]))
        expired = {split_table_key(k): seq for k, seq in plan.expired.items()}
        writer = IsolatingWriter(self.store.store, rows, probe=self.store.probe,
                                 backoff_s=self.config.retry_initial_s)

        async def store() -> IsolatedWrite[tuple[str, str]]:
            with SINK_LATENCY.labels("mysql").time():
                # remembered before the states are dropped (see SessionState.expired)
                await self.store.remember_closed_sessions(expired, now)
                return await writer.run()

        written = await retry_forever(
            store,
            what="mysql",
            initial_s=self.config.retry_initial_s,
            max_s=self.config.retry_max_s,
        )
        if not written.rejected:
            return written.stored, rows, set()
        dead = []
        for r in written.rejected:
            SINK_FAILURES.labels("mysql", r.error.error_class).inc()
            dead.append(self._dead_letter(items[indexes[r.index]].record, Rejected(
                UNSTORABLE, r.error.error_class,
                f"the database refused the row: {r.error.describe()}"), tally))
        await self._deliver(dead, "dlq")
        result.dead_lettered += len(dead)
        refused_rows = {r.index for r in written.rejected}
        kept = [row for n, row in enumerate(rows) if n not in refused_rows]
        return written.stored, kept, {indexes[n] for n in refused_rows}

    async def _plan(self, items: Sequence[_Item]) -> SessionPlan:
        """The batch's session transitions, over the states as the table holds
        them; conversations it does not hold are looked up in the database (a
        state dropped after the retention left its last session number there)."""
        await self._publishing_done({table_key(i.event.tenant_id, i.event.conversation_id)
                                     for i in items})
        current = {}
        for i in items:
            key = table_key(i.event.tenant_id, i.event.conversation_id)
            if key not in current:
                current[key] = self.states.get(key)
        unknown = {(i.event.tenant_id, i.event.conversation_id) for i in items
                   if not isinstance(i.event, IdleCheck)
                   and current[table_key(i.event.tenant_id, i.event.conversation_id)] is None}

        async def lookup() -> dict[tuple[str, str], int]:
            return await self.store.last_closed_sessions(sorted(unknown))

        last = await retry_forever(lookup, what="mysql", initial_s=self.config.retry_initial_s,
                                   max_s=self.config.retry_max_s) if unknown else {}
        events = [SourcedEvent(i.record.topic, i.record.offset, i.event) for i in items]
        rules = SessionRules(self.config.idle_timeout_s, self.config.closed_retention_s,
                             self.config.session_grace_s)
        return plan_sessions(events, current.__getitem__,
                             {table_key(*k): seq for k, seq in last.items()}, self.clock(), rules)

    def _apply(
        self,
        items: Sequence[_Item],
        plan: SessionPlan,
        rows: Sequence[dict[str, Any]],
        new_keys: set[tuple[str, str]],
        refused: set[int],
        result: IngestResult,
        tally: _Tally,
    ) -> tuple[dict[tuple[str, str], list[MessageDoc]], set[tuple[str, str]],
               dict[str, SourceRecord]]:
        """Stage the planned states (now that their messages are stored) and sort
        the stored messages for the cache: appended, or (already stored before: a
        redelivery) the conversation's list invalidated. Returns those and the
        last record of each conversation (its table partition)."""
        docs = {(r["tenant_id"], r["event_id"]): r for r in rows}
        appended: dict[tuple[str, str], list[MessageDoc]] = defaultdict(list)
        queued: set[tuple[str, str]] = set()  # (tenant, event) appended in this batch
        invalidate: set[tuple[str, str]] = set()
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

    def _late(self, items: Sequence[_Item], plan: SessionPlan,
              new_keys: set[tuple[str, str]]) -> None:
        """A message of a closed session stored only now (it was passed over and
        delivered again, or came out of order) gets its session a late closing
        event, in the outbox. Only the late candidates count, each by its first
        copy in the batch: a redelivered copy after the session's end of a
        message stored earlier in the same batch, in its session, is not late;
        nor is a message of a session the same batch closes."""
        first_copy: dict[tuple[str, str], int] = {}
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
                closed = state.late(seq, first.record.topic, first.record.offset,
                                    self.clock(), first.event)
                plan.closed.append(closed)
                plan.publish.append(closed)

    async def _publishing_done(self, keys: set[str]) -> None:
        """Wait until no earlier batch is publishing closing events of ``keys``:
        planned over the state before those events left its outbox, this batch
        would publish them a second time."""
        while waits := {f for key in keys if (f := self._publishing.get(key)) is not None}:
            await asyncio.wait(waits)

    async def _finish(
        self,
        appended: dict[tuple[str, str], list[MessageDoc]],
        fresh: set[tuple[str, str]],
        invalidate: set[tuple[str, str]],
        plan: SessionPlan,
        last: dict[str, SourceRecord],
        result: IngestResult,
        passed: Sequence[tuple[ErasureFence, int]] = (),
    ) -> None:
        # the states (with the closing events in their outbox) are in the table
        # before the events are published, and each event leaves its outbox only
        # once published: a crash anywhere leaves it to be published again
        try:
            await asyncio.gather(self._write_cache(appended, fresh, invalidate, result),
                                 self.states.barrier())
            if plan.publish:
                closed = [
                    Outgoing(self.config.session_closed_topic, c.conversation_id.encode(),
                             c.model_dump_json().encode())
                    for c in plan.publish
                ]
                await self._deliver(closed, "session-closed")
                self._sent(plan, last)
            # the fence is passed once everything stored before it is written (the
            # tails of earlier batches ran before this one) and its tombstones are
            await self._pass_fences(passed)
        finally:
            self._published(plan)

    async def _pass_fences(self, passed: Sequence[tuple[ErasureFence, int]]) -> None:
        record = self.fence_passed
        if record is None:
            return
        for fence, tombstones in passed:
            await retry_forever(partial(record, fence, tombstones), what="erasure-fence",
                                initial_s=self.config.retry_initial_s,
                                max_s=self.config.retry_max_s)

    def _published(self, plan: SessionPlan) -> None:
        """Let batches waiting on this one's closing events go on (after a
        failure too: the events are still in the outboxes)."""
        done = {self._publishing.pop(key, None)
                for key in {table_key(c.tenant_id, c.conversation_id) for c in plan.publish}}
        for f in done:
            if f is not None and not f.done():
                f.set_result(None)

    def _sent(self, plan: SessionPlan, last: dict[str, SourceRecord]) -> None:
        """Empty the outboxes of what was published, on the newest state of each,
        and write them at once (the session scan reads the table: a state left
        saying "unpublished" would be sent an idle check for nothing)."""
        ids = {c.closed_id for c in plan.publish}
        changed = False
        for key in plan.states:
            state = SessionState.from_table(self.states.get(key))
            if state is not None and state.sent(ids):
                self.states.stage(key, state.to_table(), last[key])
                changed = True
        if changed:
            self.states.flush()

    async def _write_cache(
        self,
        appended: dict[tuple[str, str], list[MessageDoc]],
        fresh: set[tuple[str, str]],
        invalidate: set[tuple[str, str]],
        result: IngestResult,
    ) -> None:
        if not self.cache.enabled or not (appended or invalidate):
            return
        try:  # returns (or raises) only once a failure is marked durably
            await self.stale.write(appended, fresh, invalidate)
        except CacheUnavailable as exc:
            result.cache_ok = False
            SINK_FAILURES.labels("redis", type(exc.__cause__ or exc).__name__).inc()
