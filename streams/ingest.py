"""IngestProcessor: one batch of chat events into MySQL, Redis and the session table.

Order per batch, and why:

1. decode; bad input is dead-lettered (delivered before anything is acknowledged);
2. sub-agent chat is re-keyed to the parent conversation's topic partition;
3. the database stores the messages (idempotent on event id), retried with
   backoff until it succeeds: the batch is never acknowledged before that;
4. the session table counts the stored messages (idempotent on source offset)
   and closes sessions on ``session_end``, and on an idle check from the session
   scan when the state (re-checked here: a message may have arrived since the
   scan) is still open and idle for ``idle_timeout_s``;
5. Redis gets one pipeline (an event twice in the batch is appended once); its
   failure is logged and counted and changes nothing above: the touched
   conversations are marked stale in the database (:mod:`streams.stale`) before
   the batch is acknowledged;
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
from streams.domain.events import Rejected, decode_chat_event
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
from streams.stale import StaleHistories

log = logging.getLogger(__name__)


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
        stale: StaleHistories,
        state_flush_interval_s: float = 0.0,
    ) -> None:
        self.config = config
        self.store = store
        self.cache = cache
        self.stale = stale
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
                self._classify_idle(rec, items, dlq, tally)
                continue
            decoded = decode_chat_event(rec.value, cfg.max_content_bytes)
            if isinstance(decoded, Rejected):
                dlq.append(dead_letter(
                    rec, dlq_topic=cfg.dlq_topic, stage="ingest", reason=decoded.reason,
                    error_class=decoded.error_class, message=decoded.message,
                ))
                DEAD_LETTERS.labels("ingest", decoded.reason).inc()
                tally.add(rec.topic, "dead_lettered")
                continue
            if rec.topic == cfg.subagent_topic:
                assert isinstance(decoded, ChatMessage)
                items.append(_Item(rec, as_parent_message(decoded), origin=decoded.conversation_id))
                continue
            what = disposition(decoded)
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

    def _classify_idle(
        self, rec: SourceRecord, items: list[_Item], dlq: list[Outgoing], tally: _Tally
    ) -> None:
        try:
            check = IdleCheck.model_validate_json(rec.value or b"")
        except ValueError as exc:
            dlq.append(dead_letter(
                rec, dlq_topic=self.config.dlq_topic, stage="ingest", reason="schema",
                error_class=type(exc).__name__, message=str(exc),
            ))
            DEAD_LETTERS.labels("ingest", "schema").inc()
            tally.add(rec.topic, "dead_lettered")
            return
        items.append(_Item(rec, check))

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

        now = datetime.now(UTC)
        rows = [
            message_row(i.event, now, i.origin) for i in items if isinstance(i.event, ChatMessage)
        ]

        async def store() -> set[tuple[str, str]]:
            with SINK_LATENCY.labels("mysql").time():
                return await self.store.store(rows)

        new_keys = await retry_forever(
            store,
            what="mysql",
            initial_s=self.config.retry_initial_s,
            max_s=self.config.retry_max_s,
        )
        result.stored = len(new_keys)
        result.duplicates = len(rows) - len(new_keys)

        appended, fresh, invalidate = self._apply_state(items, rows, new_keys, result, tally)
        tally.flush()
        return result, self._finish(appended, fresh, invalidate, result)

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
        queued: set[tuple[str, str]] = set()  # (tenant, event) appended in this batch
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
                if ek in queued:  # the same event earlier in this batch: stored once
                    tally.add(rec.topic, "duplicate")
                elif ek in new_keys:
                    queued.add(ek)
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
        try:  # returns (or raises) only once a failure is marked durably
            await self.stale.write(appended, fresh, invalidate)
        except CacheUnavailableError as exc:
            result.cache_ok = False
            SINK_FAILURES.labels("redis", type(exc.__cause__ or exc).__name__).inc()
