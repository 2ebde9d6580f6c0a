"""Classification: what becomes of each record of a batch.

A record is decoded (bad input is dead-lettered, as is an event dated further
ahead of the worker's clock than ``max_future_s``), skipped when an erasure
covers it (a session end only a user erasure covers still closes its session,
stripped of its sender; a message an erasure deleted past its cutoff is skipped
once looked up, :meth:`Classifier.drop_erased`), and placed
(:mod:`streams.ingest.rules.routing`): stored where it was read, stored in its
parent conversation (sub-agent chat), re-keyed to its conversation's home
partition, refused, or dropped. An event read on the chat
topic is weighed against its tenant's quota of events first, and dead-lettered
when the quota refuses it (:mod:`streams.ingest.rules.quota`; a tenant whose
events over it are delayed was weighed before, :mod:`streams.ingest.pacing`).
Idle checks are taken as they are; erasure fences were taken in before
(:mod:`streams.ingest.fences`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from streams.backoff import retry_forever
from streams.clock import naive_utc
from streams.erasure.model import ErasureMark
from streams.erasure.rules.coverage import ErasureIndex, EventPlace
from streams.ingest.model import IngestConfig, IngestResult, Taken, Tally
from streams.ingest.ports import ErasedEvents, EventQuota
from streams.ingest.rules.quota import counts, over_quota
from streams.ingest.rules.routing import place
from streams.ingest.rules.subagent import as_parent_message
from streams.metrics import DEAD_LETTERS, ERASURE_SKIPPED
from streams.session.rules.batch import BareEnd
from streams.wire.dead_letter import dead_letter
from streams.wire.decode import (
    OUT_OF_RANGE,
    SCHEMA,
    Rejected,
    decode_chat_event,
    decode_idle_record,
)
from streams.wire.envelope import Outgoing, SourceRecord
from streams.wire.headers import FIRST_READ, ORIGIN_OFFSET, ORIGIN_PARTITION, header
from streams.wire.records import ChatMessage, IdleCheck, SessionEnd

NOT_REROUTED = Rejected(
    SCHEMA, "NotRekeyed",
    "the re-key topic carries only sub-agent chat for a parent conversation and chat events "
    "in their conversation's home partition",
)


def rejected_record(rec: SourceRecord, rejected: Rejected, tally: Tally, *,
                    dlq_topic: str) -> Outgoing:
    """The dead letter of ``rec``, counted."""
    DEAD_LETTERS.labels("ingest", rejected.reason).inc()
    tally.add(rec.topic, "dead_lettered")
    return dead_letter(
        rec, dlq_topic=dlq_topic, stage="ingest", reason=rejected.reason,
        error_class=rejected.error_class, message=rejected.message,
    )


class Classifier:
    """``home``: a conversation's home partition (None: where the producer put it);
    ``erasures``: the erasures taken in, whose events are skipped; ``quota``: the
    quota of events per tenant (None: no limit); ``erased_events``: the messages
    erasures deleted past their cutoff, skipped too (None: not looked up)."""

    def __init__(self, config: IngestConfig, erasures: ErasureIndex, *,
                 clock: Callable[[], float], home: Callable[[str], int] | None,
                 quota: EventQuota | None = None,
                 erased_events: ErasedEvents | None = None) -> None:
        self.config = config
        self.erased_events = erased_events
        self.quota = quota
        self.erasures = erasures
        self.clock = clock
        self.home = home

    def classify(
        self, records: Sequence[SourceRecord], result: IngestResult, tally: Tally
    ) -> tuple[list[Taken], list[Outgoing], list[Outgoing]]:
        """The events to take on, the dead letters and the re-routed records."""
        cfg = self.config
        items: list[Taken] = []
        dlq: list[Outgoing] = []
        reroute: list[Outgoing] = []
        for rec in records:
            if cfg.idle_topic is not None and rec.topic == cfg.idle_topic:
                check = decode_idle_record(rec.value)
                if isinstance(check, Rejected):
                    dlq.append(self.dead_letter(rec, check, tally))
                elif isinstance(check, IdleCheck):
                    items.append(Taken(rec, check))
                continue  # a fence was taken in before (see ErasureFences.take_in)
            decoded = decode_chat_event(rec.value, cfg.max_content_bytes)
            if not isinstance(decoded, Rejected):
                decoded = self._not_ahead(decoded)
            if isinstance(decoded, Rejected):
                dlq.append(self.dead_letter(rec, decoded, tally))
                continue
            bare: BareEnd | None = None  # an erased user's end: closes, for the others
            if (covered := self._erased(decoded, rec)) is not None:
                if not isinstance(covered, BareEnd):
                    tally.add(rec.topic, "erased")
                    ERASURE_SKIPPED.labels("ingest").inc()
                    result.erased += 1
                    continue
                bare = covered  # placed like any session end: at its conversation's home
            if self.quota is not None and counts(rec.topic, chat_topic=cfg.chat_topic):
                refused = self.quota.weigh(rec, decoded.tenant_id, self.clock())
                if refused is not None:
                    dlq.append(self.dead_letter(rec, over_quota(refused), tally))
                    continue
            where = place(decoded, internal=rec.topic == cfg.subagent_topic,
                          partition=rec.partition, home=self.home,
                          rekeyed=header(rec.headers, ORIGIN_PARTITION) is not None)
            if where.action == "store":
                items.append(Taken(rec, decoded if bare is None else bare))
            elif where.action == "store_in_parent":
                assert isinstance(decoded, ChatMessage)
                items.append(Taken(rec, as_parent_message(decoded), origin=decoded.conversation_id))
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
                dlq.append(self.dead_letter(rec, NOT_REROUTED, tally))
            else:
                tally.add(rec.topic, "dropped_subagent")
                result.dropped += 1
        result.dead_lettered = len(dlq)
        result.rerouted = len(reroute)
        return items, dlq, reroute

    def dead_letter(self, rec: SourceRecord, rejected: Rejected, tally: Tally) -> Outgoing:
        return rejected_record(rec, rejected, tally, dlq_topic=self.config.dlq_topic)

    def _erased(self, event: ChatMessage | SessionEnd,
                rec: SourceRecord) -> ErasureMark | BareEnd | None:
        """The erasure covering ``event`` (of its subject, and up to its cutoff or read
        below the chat-topic offsets recorded with it), if any. A session end only a
        user erasure covers still closes its conversation's session for the users
        left: it comes back stripped of its sender (:class:`BareEnd`)."""
        if not len(self.erasures):
            return None
        parent = getattr(event, "parent_conversation_id", None)
        conversations = (event.conversation_id, parent) if parent else (event.conversation_id,)
        at, places = naive_utc(event.created_at), self._chat_places(rec)
        mark = self.erasures.event_covered(event.tenant_id, event.user_id, conversations,
                                           at, places)
        if (mark is not None and isinstance(event, SessionEnd)
                and self.erasures.event_covered(event.tenant_id, event.user_id, conversations,
                                                at, places, users=False) is None):
            return BareEnd(event.tenant_id, event.conversation_id, event.user_id)
        return mark

    async def drop_erased(self, items: list[Taken], result: IngestResult,
                          tally: Tally) -> list[Taken]:
        """``items`` without the messages an erasure deleted and remembered (dated
        after its cutoff, so not covered by it): an upstream sending one again does
        not bring it back. Only events of a tenant, user or conversation an erasure
        names are looked up."""
        if self.erased_events is None or not len(self.erasures):
            return items
        keys = {(i.event.tenant_id, i.event.event_id) for i in items
                if isinstance(i.event, ChatMessage) and self.erasures.names(
                    i.event.tenant_id, i.event.user_id,
                    (i.event.conversation_id, i.origin) if i.origin
                    else (i.event.conversation_id,))}
        if not keys:
            return items
        lookup = partial(self.erased_events.erased, sorted(keys))
        erased = await retry_forever(lookup, what="mysql", initial_s=self.config.retry_initial_s,
                                     max_s=self.config.retry_max_s)
        kept = []
        for i in items:
            if isinstance(i.event, ChatMessage) and (i.event.tenant_id, i.event.event_id) in erased:
                tally.add(i.record.topic, "erased")
                ERASURE_SKIPPED.labels("ingest").inc()
                result.erased += 1
            else:
                kept.append(i)
        return kept

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

    def _not_ahead(self, event: ChatMessage | SessionEnd) -> ChatMessage | SessionEnd | Rejected:
        """An event dated further ahead of this worker's clock than
        ``max_future_s`` is refused: its time cannot be when it happened."""
        ahead = event.created_at.timestamp() - self.clock()
        if ahead <= self.config.max_future_s:
            return event
        return Rejected(OUT_OF_RANGE, "FutureTime",
                        f"created_at is {ahead:.0f} s ahead of the worker's clock (the limit "
                        f"is MEMSTREAM_INGEST__MAX_FUTURE_S, {self.config.max_future_s:.0f} s)")
