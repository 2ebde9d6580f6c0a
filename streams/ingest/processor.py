"""IngestProcessor: one batch of chat events into MySQL, Redis and the session table.

Order per batch, and why:

1. decode; bad input, and an event over its tenant's quota of events, is
   dead-lettered (delivered before anything is acknowledged);
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
   dead-lettered (:mod:`streams.ingest.store`); only then are the planned
   states staged;
5. Redis gets one pipeline (an event twice in the batch is appended once); its
   failure is logged and counted and changes nothing above: the touched
   conversations are marked stale in the database (:mod:`streams.session.stale`) before
   the batch is acknowledged; the states are written to the table, closing
   events in their outbox;
6. session-closed events are delivered (after the messages they refer to and
   the states that say closed), then leave the outboxes.

``process`` only returns when all of that is done, and raises nothing but
cancellation: the caller then acknowledges the whole batch. ``write`` is the
same in two steps, as the batch sink (:mod:`streams.worker.batch_sink`) takes
it: it returns once the batch is stored, with the rest still to run.

One concept a module: classification (:mod:`streams.ingest.classify`),
erasure fences (:mod:`streams.ingest.fences`), planning
(:mod:`streams.ingest.planning`), storing (:mod:`streams.ingest.store`) and
outbox publishing (:mod:`streams.ingest.publishing`); the stores behind them
are the ports of :mod:`streams.ingest.ports` and :mod:`streams.session.ports`,
the nouns in :mod:`streams.ingest.model`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from streams import tracing
from streams.erasure.rules.coverage import ErasureIndex
from streams.ingest.classify import Classifier
from streams.ingest.fences import ErasureFences
from streams.ingest.model import IngestConfig, IngestResult, Tally
from streams.ingest.planning import SessionPlanning
from streams.ingest.ports import (
    ClosedSessions,
    ErasedEvents,
    EventQuota,
    FencePassed,
    RowBatches,
    WholeConversations,
)
from streams.ingest.publishing import ClosingEvents, Delivery
from streams.ingest.store import MessageWriter
from streams.metrics import INGEST_BATCH, INGEST_EVENTS, SINK_FAILURES
from streams.session.model import ConversationKey, MessageDoc
from streams.session.ports import HotCopy, SessionTable
from streams.session.rules.batch import SessionPlan
from streams.session.stale import StaleHistories
from streams.session.state_buffer import SessionStateBuffer
from streams.stores import CacheUnavailable
from streams.wire.envelope import Publisher, SourceRecord
from streams.wire.erasure import ErasureFence


class IngestProcessor:
    """``closed`` and ``batches``: the database (the last closed sessions, the rows);
    ``home``: a conversation's home partition (None: where the producer put it);
    ``erasures``: the erasures taken in, whose events are skipped; ``fence_passed``
    and ``whole``: where a fence is recorded as passed, what a user erasure takes
    whole (see :mod:`streams.ingest.fences`); ``quota``: the quota of chat events
    per tenant, an event it refuses dead-lettered (None: no limit); ``erased_events``:
    the messages erasures deleted past their cutoff, not stored again."""

    def __init__(
        self,
        config: IngestConfig,
        closed: ClosedSessions,
        batches: RowBatches,
        cache: HotCopy,
        publisher: Publisher,
        table: SessionTable,
        clock: Callable[[], float] = time.time,
        *,
        stale: StaleHistories,
        state_flush_interval_s: float = 0.0,
        home: Callable[[str], int] | None = None,
        erasures: ErasureIndex | None = None,
        fence_passed: FencePassed | None = None,
        whole: WholeConversations | None = None,
        quota: EventQuota | None = None,
        erased_events: ErasedEvents | None = None,
    ) -> None:
        self.config = config
        self.quota = quota
        self.cache = cache
        self.stale = stale
        self.table = table
        self.states = SessionStateBuffer(table, interval_s=state_flush_interval_s)
        erasures = erasures if erasures is not None else ErasureIndex()
        deliver = Delivery(publisher, config)
        self.deliver = deliver
        self.classifier = Classifier(config, erasures, clock=clock, home=home, quota=quota,
                                     erased_events=erased_events)
        self.fences = ErasureFences(config, erasures, self.states, home=home, whole=whole,
                                    passed=fence_passed)
        self.outbox = ClosingEvents(config, self.states, deliver)
        self.planning = SessionPlanning(config, self.states, closed, self.outbox, clock=clock,
                                        home=home)
        self.writer = MessageWriter(config, closed, batches, deliver)

    async def write(self, batch: Sequence[SourceRecord]) -> Coroutine[Any, Any, None]:
        """The batch sink's write: stage one of ``batch`` (stored when this returns),
        and stage two still to run (see :meth:`store_batch`)."""
        _, tail = await self.store_batch(batch)
        return tail

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
        links = tracing.links_of(r.headers for r in records) if tracing.exporting() else ()
        with tracing.span("ingest batch", {tracing.MESSAGING_SYSTEM: "kafka",
                                           tracing.MESSAGING_OPERATION_TYPE: "process",
                                           tracing.MESSAGING_BATCH_COUNT: len(records)},
                          kind=tracing.CONSUMER, links=links):
            return await self._store_batch(records)

    async def _store_batch(
        self, records: Sequence[SourceRecord]
    ) -> tuple[IngestResult, Coroutine[Any, Any, None]]:
        result = IngestResult()
        tally = Tally()
        INGEST_BATCH.observe(len(records))
        fences = self.fences.take_in(records)
        items, dlq, reroute = self.classifier.classify(records, result, tally)
        items = await self.classifier.drop_erased(items, result, tally)
        await self.deliver(dlq, "dlq")
        await self.deliver(reroute, "reroute")

        plan = await self.planning.plan(items)
        new_keys, rows, refused = await self.writer.store(items, plan, result, tally)
        result.stored = len(new_keys)
        result.duplicates = len(rows) - len(new_keys)

        appended, invalidate, last = self.planning.apply(items, plan, rows, new_keys, refused,
                                                         result, tally)
        causes = self.planning.causes(items, plan)
        passed = await self.fences.tombstones(fences)
        _count(tally)
        self.outbox.begin(plan)
        return result, self._finish(appended, plan.fresh - invalidate, invalidate, plan, last,
                                    result, passed, causes, tracing.current())

    async def _finish(
        self,
        appended: dict[ConversationKey, list[MessageDoc]],
        fresh: set[ConversationKey],
        invalidate: set[ConversationKey],
        plan: SessionPlan,
        last: dict[str, SourceRecord],
        result: IngestResult,
        passed: Sequence[tuple[ErasureFence, int]] = (),
        causes: Mapping[str, SourceRecord] | None = None,
        trace: tracing.Context | None = None,
    ) -> None:
        """Stage two, in the trace of the batch's stage one (``trace``), wherever the
        batch sink runs it; ``causes``: the record that closed each session closed."""
        # the states (with the closing events in their outbox) are in the table
        # before the events are published, and each event leaves its outbox only
        # once published: a crash anywhere leaves it to be published again
        with tracing.attached(trace):
            try:
                await asyncio.gather(self._write_cache(appended, fresh, invalidate, result),
                                     self.states.barrier())
                await self.outbox.publish(plan, last, causes or {})
                # the fence is passed once everything stored before it is written (the
                # tails of earlier batches ran before this one) and its tombstones are
                await self.fences.pass_fences(passed)
            finally:
                self.outbox.done(plan)

    async def _write_cache(
        self,
        appended: dict[ConversationKey, list[MessageDoc]],
        fresh: set[ConversationKey],
        invalidate: set[ConversationKey],
        result: IngestResult,
    ) -> None:
        if not self.cache.enabled or not (appended or invalidate):
            return
        try:  # returns (or raises) only once a failure is marked durably
            await self.stale.write(appended, fresh, invalidate)
        except CacheUnavailable as exc:
            result.cache_ok = False
            SINK_FAILURES.labels("redis", type(exc.__cause__ or exc).__name__).inc()


def _count(tally: Tally) -> None:
    """Add the batch's event counts to the metrics."""
    for (topic, outcome), n in tally.counts.items():
        INGEST_EVENTS.labels(topic, outcome).inc(n)
    tally.counts.clear()
