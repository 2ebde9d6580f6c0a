"""IngestProcessor: one batch of chat events into MySQL, Redis and the session table.

Order per batch, and why:

1. decode; bad input is dead-lettered (delivered before anything is acknowledged);
2. sub-agent chat is re-keyed to the parent conversation's topic partition;
3. the database stores the messages (idempotent on event id); a transient
   error is retried with backoff until it passes, so the batch is never
   acknowledged before that; a row the database refuses for good is isolated
   (the batch is split, its batch-mates stored) and dead-lettered
   (:mod:`streams.sinks.isolation`);
4. the session table counts the stored messages (idempotent on source offset)
   and closes sessions on ``session_end``, and on an idle check from the session
   scan when the state (re-checked here: a message may have arrived since the
   scan) is still open and idle for ``idle_timeout_s``;
5. Redis gets one pipeline; its failure is logged and counted and changes
   nothing above;
6. session-closed events are delivered (after the messages they refer to).

``process`` only returns when all of that is done, and raises nothing but
cancellation: the caller then acknowledges the whole batch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Callable, Coroutine, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from streams.cache import CacheUnavailableError, ConversationCache
from streams.db.messages import MessageDoc, MessageStore, message_row, row_to_doc
from streams.domain.events import SCHEMA, UNSTORABLE, Rejected, decode_chat_event, decode_record
from streams.domain.session_state import SessionState, table_key
from streams.domain.subagent import Disposition, as_parent_message, disposition
from streams.metrics import (
    DEAD_LETTERS,
    INGEST_BATCH,
    INGEST_EVENTS,
    SESSIONS_CLOSED,
    SINK_FAILURES,
    SINK_LATENCY,
)
from streams.publish import Outgoing, Publisher, SourceRecord, dead_letter
from streams.records import ChatMessage, IdleCheck, SessionClosed, SessionEnd
from streams.retry import retry_forever
from streams.session_buffer import SessionStateBuffer
from streams.sinks.isolation import IsolatedWrite, IsolatingWriter

log = logging.getLogger(__name__)

NOT_REROUTED = Rejected(
    SCHEMA, "NotSubagentChat",
    "the sub-agent topic carries only sub-agent chat for a parent conversation",
)


class SessionTable(Protocol):
    """The sessions table as the processor needs it."""

    def get(self, key: str) -> dict[str, Any] | None: ...

    def set(self, key: str, value: dict[str, Any]) -> None: ...

    def context(self, record: SourceRecord) -> AbstractContextManager[None]:
        """Writes inside this context belong to ``record``'s partition."""
        ...


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


@dataclass
class IngestResult:
    stored: int = 0
    duplicates: int = 0
    dead_lettered: int = 0
    rerouted: int = 0
    dropped: int = 0
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
        state_flush_interval_s: float = 0.0,
    ) -> None:
        self.config = config
        self.store = store
        self.cache = cache
        self.publisher = publisher
        self.table = table
        self.states = SessionStateBuffer(table, interval_s=state_flush_interval_s)
        self.clock = clock

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
                check = decode_record(rec.value, IdleCheck)
                if isinstance(check, Rejected):
                    dlq.append(self._dead_letter(rec, check, tally))
                else:
                    items.append(_Item(rec, check))
                continue
            decoded = decode_chat_event(rec.value, cfg.max_content_bytes)
            if isinstance(decoded, Rejected):
                dlq.append(self._dead_letter(rec, decoded, tally))
                continue
            what = disposition(decoded)
            if rec.topic == cfg.subagent_topic:
                # only what this processor re-routed belongs here
                if what is not Disposition.REROUTE or not isinstance(decoded, ChatMessage):
                    dlq.append(self._dead_letter(rec, NOT_REROUTED, tally))
                    continue
                items.append(_Item(rec, as_parent_message(decoded), origin=decoded.conversation_id))
                continue
            if what is Disposition.KEEP:
                items.append(_Item(rec, decoded))
            elif what is Disposition.REROUTE:
                assert isinstance(decoded, ChatMessage) and decoded.parent_conversation_id
                reroute.append(Outgoing(
                    cfg.subagent_topic, decoded.parent_conversation_id.encode(), rec.value,
                    [*rec.headers, ("memstream.origin.offset", str(rec.offset).encode())],
                ))
                tally.add(rec.topic, "rerouted")
            else:
                tally.add(rec.topic, "dropped_subagent")
                result.dropped += 1
        result.dead_lettered = len(dlq)
        result.rerouted = len(reroute)
        return items, dlq, reroute

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

        A :class:`~streams.sinks.batching.BatchSink` runs stage two of this batch
        while stage one of the next batch runs, and acknowledges the batch once
        stage two is done.
        """
        result = IngestResult()
        tally = _Tally()
        INGEST_BATCH.observe(len(records))
        items, dlq, reroute = self._classify(records, result, tally)
        await self._deliver(dlq, "dlq")
        await self._deliver(reroute, "reroute")

        items, rows, new_keys = await self._store(items, result, tally)
        result.stored = len(new_keys)
        result.duplicates = len(rows) - len(new_keys)

        appended, fresh, invalidate = self._apply_state(items, rows, new_keys, result, tally)
        tally.flush()
        return result, self._finish(appended, fresh, invalidate, result)

    async def _store(
        self, items: list[_Item], result: IngestResult, tally: _Tally
    ) -> tuple[list[_Item], list[dict[str, Any]], set[tuple[str, str]]]:
        """Store the batch's messages: transient database errors are retried until
        they pass; a row the database refuses for good is dead-lettered (its
        batch-mates are stored). Returns the items and rows left, and the new keys."""
        now = datetime.now(UTC)
        messages: list[_Item] = []
        rows: list[dict[str, Any]] = []
        for it in items:
            if isinstance(it.event, ChatMessage):
                messages.append(it)
                rows.append(message_row(it.event, now, it.origin))
        writer = IsolatingWriter(self.store.store, rows, probe=self.store.probe,
                                 backoff_s=self.config.retry_initial_s)

        async def store() -> IsolatedWrite[tuple[str, str]]:
            with SINK_LATENCY.labels("mysql").time():
                return await writer.run()

        written = await retry_forever(
            store,
            what="mysql",
            initial_s=self.config.retry_initial_s,
            max_s=self.config.retry_max_s,
        )
        if not written.rejected:
            return items, rows, written.stored
        dead = []
        for r in written.rejected:
            SINK_FAILURES.labels("mysql", r.error.error_class).inc()
            dead.append(self._dead_letter(messages[r.index].record, Rejected(
                UNSTORABLE, r.error.error_class,
                f"the database refused the row: {r.error.describe()}"), tally))
        await self._deliver(dead, "dlq")
        result.dead_lettered += len(dead)
        refused = {r.index for r in written.rejected}
        gone = {id(messages[n]) for n in refused}
        kept = [row for n, row in enumerate(rows) if n not in refused]
        return [i for i in items if id(i) not in gone], kept, written.stored

    async def _finish(
        self,
        appended: dict[tuple[str, str], list[MessageDoc]],
        fresh: set[tuple[str, str]],
        invalidate: set[tuple[str, str]],
        result: IngestResult,
    ) -> None:
        await asyncio.gather(self._write_cache(appended, fresh, invalidate, result),
                             self.states.barrier())
        if result.closed:
            closed = [
                Outgoing(self.config.session_closed_topic, c.conversation_id.encode(),
                         c.model_dump_json().encode())
                for c in result.closed
            ]
            await self._deliver(closed, "session-closed")

    def _apply_state(
        self,
        items: Sequence[_Item],
        rows: Sequence[dict[str, Any]],
        new_keys: set[tuple[str, str]],
        result: IngestResult,
        tally: _Tally,
    ) -> tuple[dict[tuple[str, str], list[MessageDoc]], set[tuple[str, str]], set[tuple[str, str]]]:
        now = self.clock()
        docs = {(r["tenant_id"], r["event_id"]): row_to_doc(r) for r in rows}
        appended: dict[tuple[str, str], list[MessageDoc]] = defaultdict(list)
        fresh: set[tuple[str, str]] = set()
        invalidate: set[tuple[str, str]] = set()
        states: dict[str, SessionState] = {}
        last_record: dict[str, SourceRecord] = {}
        for it in items:
            ev = it.event
            conv = (ev.tenant_id, ev.conversation_id)
            key = table_key(*conv)
            state = states.get(key)
            if isinstance(ev, IdleCheck):
                if state is None:
                    state = SessionState.from_table(self.states.get(key))
                    if state is None:  # not this worker's, or long gone: nothing to close
                        tally.add(it.record.topic, "idle_unknown")
                        continue
                    states[key] = state
                self._apply_idle(state, it.record, now, result, tally)
                last_record[key] = it.record
                continue
            if state is None:
                state = SessionState.from_table(self.states.get(key)) or SessionState.new(ev)
                states[key] = state
                if state.message_count == 0:
                    fresh.add(conv)
            rec = it.record
            if isinstance(ev, ChatMessage):
                ek = (ev.tenant_id, ev.event_id)
                if ek in new_keys:
                    appended[conv].append(docs[ek])
                    tally.add(rec.topic, "stored")
                else:
                    invalidate.add(conv)
                    tally.add(rec.topic, "duplicate")
                state.apply_message(ev, rec.topic, rec.offset, now)
            else:
                tally.add(rec.topic, "session_end")
                if not state.seen(rec.topic, rec.offset):
                    state.mark(rec.topic, rec.offset)
                    closed = state.close("explicit", now, ev)
                    if closed is not None:
                        result.closed.append(closed)
                        SESSIONS_CLOSED.labels("explicit").inc()
            last_record[key] = rec
        # staged: written to the table (a changelog record) at most once per
        # conversation and flush interval, before the batch is acknowledged
        for key, state in states.items():
            self.states.stage(key, state.to_table(), last_record[key])
        return appended, fresh - invalidate, invalidate

    def _apply_idle(
        self, state: SessionState, rec: SourceRecord, now: float, result: IngestResult,
        tally: _Tally,
    ) -> None:
        """Close the session if it is still open and idle (the scan may be stale)."""
        if state.seen(rec.topic, rec.offset):
            tally.add(rec.topic, "idle_replayed")
            return
        state.mark(rec.topic, rec.offset)
        if not state.open or state.idle_for(now) < self.config.idle_timeout_s:
            tally.add(rec.topic, "idle_active")
            return
        closed = state.close("idle", now)
        if closed is None:
            tally.add(rec.topic, "idle_active")
            return
        tally.add(rec.topic, "idle_closed")
        result.closed.append(closed)
        SESSIONS_CLOSED.labels("idle").inc()

    async def _write_cache(
        self,
        appended: dict[tuple[str, str], list[MessageDoc]],
        fresh: set[tuple[str, str]],
        invalidate: set[tuple[str, str]],
        result: IngestResult,
    ) -> None:
        if not self.cache.enabled or not (appended or invalidate):
            return
        try:
            with SINK_LATENCY.labels("redis").time():
                await self.cache.append(appended, fresh=fresh, invalidate=invalidate)
        except CacheUnavailableError as exc:
            result.cache_ok = False
            SINK_FAILURES.labels("redis", type(exc.__cause__ or exc).__name__).inc()
