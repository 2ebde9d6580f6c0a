"""ConsolidationProcessor: closing events in, consolidations (or retries) out.

``handle(record)`` does one event: the consolidation agent starts each event
of ``memory.session-closed`` as it arrives and acknowledges it once ``handle``
returned (``streams/worker/in_flight.py``, which keeps one conversation's
events in order), and the retry agent calls it for records from
``memory.retry``. ``process(records)`` does a batch at once (the benchmarks):
events of different conversations run concurrently, events of one
conversation one after another, in order. Each run holds one of the worker's
``concurrency`` slots, and one tenant's runs at most its share of them (the
``sessions_consolidating`` quota, by default ``tenant_share``: :mod:`.slots`); a
run waiting for a cube's lock holds none. A process-wide lock per conversation
also keeps a retried event and a fresh one of the same conversation from
running at the same time.

A run that leaves part of its session to a next part
(:mod:`.rules.parts`) hands on that part's closing event, sent on the source
topic (keyed by conversation, after this partition's other events) before the
method returns, like a retry record: one session never holds a partition for
longer than one bounded part.

Neither method raises (except on cancellation): a failure is classified
(:meth:`.failures.FailureRouter.classify`); a database outage (or a cube lock lost with
its connection) is retried in place with backoff; anything else — a cube lock not got
in time included, requeued with its attempt count unchanged — becomes a record for
``memory.retry`` or ``memory.dlq``, delivered before the method returns, so the caller
may then acknowledge the event.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from streams import tracing
from streams.backoff import forever, retry_forever
from streams.consolidation.failures import FailureRouter, attempt_of
from streams.consolidation.pipeline import ConsolidationPipeline, Outcome
from streams.consolidation.slots import TenantSlots
from streams.memory.cube_locks import KeyedLocks
from streams.memory.rules.routing import route
from streams.metrics import (
    CONSOLIDATION_LATENCY,
    CONSOLIDATION_PARTS,
    CONSOLIDATIONS,
    CONSOLIDATIONS_IN_FLIGHT,
    DEAD_LETTERS,
)
from streams.quotas.counts import CountQuota
from streams.wire.decode import Rejected, decode_record
from streams.wire.envelope import Outgoing, Publisher, SourceRecord
from streams.wire.records import SessionClosed

log = logging.getLogger(__name__)


@dataclass
class Handled:
    """What one closing event came to: ``outcome`` and ``provider`` label
    ``memstream_consolidations_total``; ``forward`` is the retry or dead-letter record
    to send, or when the run went through, the closing event of the session's next
    part (none when the session is done); ``detail`` what the run did."""

    outcome: str  # done, duplicate, nothing_new, skipped, requeued, retried, dead_lettered
    provider: str
    forward: Outgoing | None = None
    detail: Outcome | None = None


class ConsolidationProcessor:
    def __init__(self, pipeline: ConsolidationPipeline, router: FailureRouter,
                 publisher: Publisher, *, concurrency: int = 8, tenant_share: int = 0,
                 tenant_shares: Mapping[str, int] | None = None,
                 share_quota: CountQuota | None = None, slots: TenantSlots | None = None,
                 infra_initial_s: float = 0.5,
                 infra_max_s: float = 10.0, locks: KeyedLocks | None = None,
                 sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
                 rand: Callable[[], float] = random.random) -> None:
        self.pipeline = pipeline
        self.router = router
        self.publisher = publisher
        self.slots = slots or TenantSlots(concurrency, tenant_share, shares=tenant_shares,
                                          quota=share_quota)
        self.infra_initial_s = infra_initial_s
        self.infra_max_s = infra_max_s
        self.infra_backoff = forever(infra_initial_s, infra_max_s)
        self.locks = locks or KeyedLocks()
        self._sleep = sleep
        self._rand = rand

    async def process(self, records: Sequence[SourceRecord]) -> list[Handled]:
        groups: OrderedDict[str, list[tuple[int, SourceRecord]]] = OrderedDict()
        results: list[Handled | None] = [None] * len(records)
        for i, rec in enumerate(records):
            groups.setdefault((rec.key or b"").decode("utf-8", "replace"), []).append((i, rec))

        async def run_group(items: list[tuple[int, SourceRecord]]) -> None:
            for i, rec in items:
                results[i] = await self.handle(rec, deliver=False)

        await asyncio.gather(*(run_group(items) for items in groups.values()))
        done = [r for r in results if r is not None]
        await self._deliver([r.forward for r in done if r.forward is not None])
        return done

    async def handle(self, record: SourceRecord, *, deliver: bool = True,
                     on_begin: Callable[[], None] = lambda: None) -> Handled:
        """Consolidate one session-closed record (or dead-letter it); ``on_begin`` is
        called once the record's work begins — at once for a record that is
        dead-lettered, else once the run holds its conversation and a slot. Before that
        the call only waits, and cancelling it leaves nothing done."""
        closed = decode_record(record.value, SessionClosed)
        if isinstance(closed, Rejected):
            on_begin()
            DEAD_LETTERS.labels("consolidation", closed.reason).inc()
            CONSOLIDATIONS.labels("unknown", "dead_lettered").inc()
            out = self.router.reject(record, closed.reason, closed.error_class, closed.message)
            if deliver:
                await self._deliver([out])
            return Handled("dead_lettered", "unknown", out)
        links = tracing.links_of(closed.trace_links) if tracing.exporting() else ()
        with tracing.consumer_span(
                f"process {record.topic}", record.headers,
                {**tracing.kafka_attributes(record.topic, record.partition, record.offset),
                 tracing.TENANT: closed.tenant_id, "memstream.trigger": closed.trigger,
                 "memstream.session_seq": closed.session_seq, "memstream.part": closed.part,
                 "memstream.messages": closed.message_count}, links=links) as span:
            key = f"{closed.tenant_id}/{closed.conversation_id}"
            async with self.locks.hold(key), self.slots.hold(closed.tenant_id):
                on_begin()
                span.add_event("begun")  # holds its conversation and a slot
                with CONSOLIDATIONS_IN_FLIGHT.track_inprogress():
                    handled = await self._run(record, closed)
            CONSOLIDATIONS.labels(handled.provider, handled.outcome).inc()
            span.set_attributes({tracing.OUTCOME: handled.outcome,
                                 "memstream.provider": handled.provider})
            if handled.forward is not None:  # the retry, dead letter or next part: in this trace
                forward = tracing.stamp(handled.forward)
                handled = dataclasses.replace(handled, forward=forward)
                if deliver:
                    await self._deliver([forward])
            return handled

    def _provider(self, closed: SessionClosed) -> str:
        return route(self.pipeline.configs.get(closed.tenant_id, closed.agent_id))

    async def _run(self, record: SourceRecord, closed: SessionClosed) -> Handled:
        failed = 0  # infrastructure failures waited out so far
        started = time.perf_counter()
        while True:
            try:
                outcome = await self.pipeline.run(closed)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # classified below; nothing escapes the agent
                failure = self.router.classify(exc)
                if failure.kind == "infrastructure":
                    log.warning("consolidation of %s waits (%s): %s: %s", closed.closed_id,
                                failure.reason, failure.error_class, failure.message)
                    failed += 1
                    await self._sleep(self.infra_backoff.delay(failed, self._rand))
                    continue
                await self._note_error(closed, f"{failure.error_class}: {failure.message}")
                out = self.router.route(record, failure)
                what = ("dead_lettered" if out.topic == self.router.dlq_topic
                        else "requeued" if failure.kind == "requeue" else "retried")
                if what == "dead_lettered":
                    DEAD_LETTERS.labels("consolidation", failure.reason).inc()
                log.warning("consolidation of %s failed (attempt %d, %s): %s: %s -> %s",
                            closed.closed_id, attempt_of(record), failure.reason,
                            failure.error_class, failure.message, out.topic)
                return Handled(what, self._provider(closed), out)
            CONSOLIDATION_LATENCY.labels(outcome.provider).observe(time.perf_counter() - started)
            return Handled(outcome.outcome, outcome.provider, self._next(outcome), outcome)

    def _next(self, outcome: Outcome) -> Outgoing | None:
        """The next part's closing event, for the source topic."""
        if outcome.next is None:
            return None
        CONSOLIDATION_PARTS.labels(outcome.next.tenant_id).inc()
        return Outgoing(self.router.source_topic, outcome.next.conversation_id.encode(),
                        outcome.next.model_dump_json().encode())

    async def _note_error(self, closed: SessionClosed, error: str) -> None:
        try:
            await self.pipeline.runs.record_error(closed.closed_id, error, self.pipeline.now())
        except Exception as exc:  # best effort: the record is the source of truth
            log.debug("could not record the error of %s: %s", closed.closed_id, exc)

    async def _deliver(self, records: Sequence[Outgoing]) -> None:
        if records:
            await retry_forever(lambda: self.publisher.publish(records), what="consolidation-out",
                                initial_s=self.infra_initial_s, max_s=self.infra_max_s)
