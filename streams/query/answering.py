"""One request from the query topic to its reply: what the query consumer runs
for every record it takes.

1. A record older than any caller waits is skipped unread; the processor skips
   one older than its own ``timeout_ms`` (:mod:`streams.query.expiry`). Both are
   counted (``memstream_query_expired_total``).
2. A request whose reply was sent before (a redelivery after a crash) is not
   answered again (``memstream_query_duplicates_total``); ``maybe_seen`` (the
   consumer's) says which requests may have been delivered before. When an
   earlier attempt began and recorded no answer (its worker was killed around
   the reply), the reply topic is searched for the reply (``sent_replies``);
   found, it is recorded and the request is not answered again; not found or
   not known, it is answered. The processor asks this (``sent_before``) only
   for a request that gets a reply: its reply topic allowed, its caller waiting.
3. Otherwise the processor's answer is delivered — the reply on the no-linger
   reply producer, then remembered as answered; a dead letter durably, retried
   until the broker takes it — and only then does the request count as answered.
   The durable copy of the record is written with others' (``AnsweredRequests``):
   :meth:`QueryAnswering.__call__` returns once the reply is out and the quick copy
   written, with that write under way, so that the query consumer's slot is not
   held for it; the consumer waits for it before the request is done.
   Once a reply is being sent, a cancellation (a revocation's drain timeout,
   during the send or during that wait for the write) waits for the send and
   both copies of the record to finish, ``SEND_GRACE_S`` at most, before it takes effect: the
   reply goes out whatever happens to the request, and the next owner must
   find it recorded. A request whose reply went out and was recorded within
   that wait ends as answered (not cancelled): the consumer commits it with
   the partition's other answered requests instead of letting it go.

A request the consumer cannot take now (:meth:`QueryAnswering.shed`) goes the
same way, its reply an ``over_quota`` refusal made without the engine.

Nothing here raises (but cancellation): the consumer may then commit past it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable

from streams import tracing
from streams.backoff import retry_forever
from streams.metrics import QUERY_DUPLICATES, QUERY_WAITED_FOR
from streams.query.answered import AnsweredRequests
from streams.query.ports import MaybeSeen, ReplySink, SentReplies, Settling
from streams.query.processor import ANSWERED, DUPLICATE, REFUSED, QueryProcessor
from streams.query.rules.rescue import caller_wait_ms, in_flight_until
from streams.wire.envelope import DeadLettered, Outgoing, Publisher, SourceRecord, ToSend
from streams.wire.spring_reply import ReplyAddress

log = logging.getLogger(__name__)

# how long a cancelled request's reply may still take to go out and be recorded:
# the default reply send timeout; with the drain timeout (3 s) it stays within the
# query group's rebalance timeout (session timeout + drain timeout)
SEND_GRACE_S = 5.0
# an attempt begun elsewhere and still under way is waited for this share of the
# caller's wait (at most IN_FLIGHT_MAX_S), its record looked at every POLL_S
IN_FLIGHT_SHARE = 0.5
POLL_S = 0.02


class QueryAnswering:
    def __init__(self, processor: QueryProcessor, replies: ReplySink,
                 dead_letters: Publisher, answered: AnsweredRequests, *,
                 retry_initial_s: float, retry_max_s: float,
                 maybe_seen: MaybeSeen = lambda rec: True,
                 sent_replies: SentReplies | None = None) -> None:
        self.processor = processor
        self.replies = replies
        self.dead_letters = dead_letters
        self.answered = answered
        self.retry_initial_s = retry_initial_s
        self.retry_max_s = retry_max_s
        self.maybe_seen = maybe_seen
        self.sent_replies = sent_replies

    async def __call__(self, rec: SourceRecord) -> Settling:
        """Answer ``rec``; back once its reply is out, with its record's durable write
        under way (None: none)."""
        return await self._deliver_handled(rec, shed=False)

    async def shed(self, rec: SourceRecord) -> Settling:
        """Refuse a request the query consumer cannot take now
        (:meth:`~streams.query.processor.QueryProcessor.shed`: ``over_quota`` without
        engine work), delivered as :meth:`__call__` delivers an answer, not recorded as
        one; raises nothing but cancellation."""
        return await self._deliver_handled(rec, shed=True)

    async def _deliver_handled(self, rec: SourceRecord, *, shed: bool) -> Settling:
        if self.processor.outdated(rec):
            return None
        with tracing.consumer_span(f"process {rec.topic}", rec.headers, tracing.kafka_attributes(
                rec.topic, rec.partition, rec.offset)) as span:
            outcome, settling = await self._deliver(rec, shed=shed)
            span.set_attribute(tracing.OUTCOME, outcome)
            return settling

    async def _deliver(self, rec: SourceRecord, *, shed: bool) -> tuple[str, Settling]:
        """What :meth:`_deliver_handled` does past the age check: the outcome, and the
        record's durable write under way."""
        asked: list[str] = []  # the request's key, once it is known to get a reply
        sent_before = functools.partial(self._sent_before, rec, asked)
        handled = await (self.processor.shed(rec, sent_before) if shed else
                         self.processor.handle(rec, sent_before,
                                               likely_new=not self.maybe_seen(rec)))
        if isinstance(handled, DeadLettered):
            dead = [handled.dead_letter]
            with tracing.producer_span(handled.dead_letter.topic):
                dead = [tracing.stamp(d) for d in dead]
                await retry_forever(lambda: self.dead_letters.publish(dead), what="dlq",
                                    initial_s=self.retry_initial_s, max_s=self.retry_max_s)
            return "dead_lettered", None
        if handled.outcome == DUPLICATE:
            QUERY_DUPLICATES.inc()
            return handled.outcome, None
        # a refusal (over quota) is not an answer: it is sent, not recorded
        key = asked[0] if asked and handled.outcome != REFUSED else None
        durable: asyncio.Future[None] | None = None
        for reply in handled.records:  # the one reply (none when its caller gave up)
            sending = asyncio.ensure_future(self._reply(reply, key))
            try:
                _, durable = await asyncio.shield(sending)
            except asyncio.CancelledError:
                # the reply is on its way: the revocation waits for it and its
                # record (for at most SEND_GRACE_S), so that the next owner knows
                if not await _sent_within(sending, SEND_GRACE_S):
                    raise
                # answered after all: finished, and committed with the others
                return handled.outcome, None
        return handled.outcome, None if durable is None else _recorded(durable)

    async def rescue(self, rec: SourceRecord) -> bool:
        """Answer a request of a partition another member holds, when no attempt at it has
        begun (:meth:`~streams.query.answered.AnsweredRequests.take_over`): the reply is
        sent and recorded as by :meth:`__call__` (the database copy written meanwhile, not
        waited for), so that its owner, should it come to the
        request later, finds it answered (or finds this attempt's mark, and the reply in
        the reply topic). Anything else is left to the owner. True when this worker
        answered it; raises nothing but cancellation."""
        taken: list[str] = []

        async def take_over(to: ReplyAddress, key: str) -> bool:
            if to.correlation_id is None or not await self.answered.take_over(key):
                return False  # no correlation id: nothing to match it by
            taken.append(key)
            return True

        with tracing.consumer_span(f"process {rec.topic}", rec.headers, {
                **tracing.kafka_attributes(rec.topic, rec.partition, rec.offset),
                "memstream.rescue": True}) as span:
            answered = await self._rescue(rec, take_over, taken)
            span.set_attribute(tracing.OUTCOME, "answered" if answered else "left")
            return answered

    async def _rescue(self, rec: SourceRecord,
                      take_over: Callable[[ReplyAddress, str], Awaitable[bool]],
                      taken: list[str]) -> bool:
        try:
            handled = await self.processor.rescue(rec, take_over)
        except Exception:
            log.exception("query request %s[%d]@%d: rescue failed", rec.topic, rec.partition,
                          rec.offset)
            return False
        if not isinstance(handled, ToSend) or handled.outcome != ANSWERED or not taken:
            return False
        delivered = True
        for reply in handled.records:
            sent, _ = await self._reply(reply, taken[0])  # its record is written meanwhile
            delivered = delivered and sent
        return delivered

    async def _sent_before(self, rec: SourceRecord, asked: list[str], to: ReplyAddress,
                           key: str) -> bool:
        cid = to.correlation_id
        if cid is None:  # nothing to match it by, here or for its caller
            return False
        asked.append(key)
        claim = await self.answered.claim(key, maybe_seen=self.maybe_seen(rec))
        if claim.answered:
            return True
        if claim.began_ms is None:
            return False
        if await self._answered_meanwhile(rec, key, claim.began_ms):
            QUERY_WAITED_FOR.labels("answered").inc()
            return True
        if self.sent_replies is None:
            return False
        sent = await self.sent_replies.sent(to.topic, cid, claim.began_ms, to.partition)
        log.info("request %s was begun before and not recorded as answered: its reply is %s",
                 cid.hex(), "unknown" if sent is None else
                 "in the reply topic" if sent else "not in the reply topic")
        if sent and (durable := await self.answered.remember(key)) is not None:
            await durable
        return bool(sent)

    async def _answered_meanwhile(self, rec: SourceRecord, key: str, began_ms: int) -> bool:
        """Whether the attempt begun at ``began_ms`` elsewhere — a worker that took the
        request over, or the owner of its hedged copy, still answering — records its
        answer by :func:`~streams.query.rules.rescue.in_flight_until`: looked at every
        ``POLL_S`` (a round trip each) until then. False at once for an older attempt."""
        until = in_flight_until(began_ms, caller_wait_ms(rec.value), share=IN_FLIGHT_SHARE)
        left = until - self.answered.wall_clock()
        if left <= 0:
            return False
        loop = asyncio.get_running_loop()
        ends = loop.time() + left
        while (now := loop.time()) < ends:
            await asyncio.sleep(min(POLL_S, ends - now))
            if (await self.answered.claim(key, maybe_seen=False)).answered:
                return True
        QUERY_WAITED_FOR.labels("not_answered").inc()
        return False

    async def _reply(self, reply: Outgoing, key: str | None,
                     ) -> tuple[bool, asyncio.Future[None] | None]:
        """Deliver the reply and record it under ``key`` (None: a reply not recorded):
        whether it was delivered, and the record's durable write under way."""
        with tracing.producer_span(reply.topic, reply.partition):
            reply = tracing.stamp(reply)
            delivered = await self.replies.deliver(reply)
        if delivered and key is not None:
            return True, await self.answered.remember(key)
        return delivered, None


async def _recorded(durable: asyncio.Future[None]) -> None:
    """The durable write of an answered request's record, as the query consumer waits
    for it: cancelled (a revocation's drain timeout), it is still waited for up to
    ``SEND_GRACE_S``, and the request ends answered if it is done by then."""
    try:
        await asyncio.shield(durable)
    except asyncio.CancelledError:
        await asyncio.wait({durable}, timeout=SEND_GRACE_S)
        if not durable.done():
            raise


async def _sent_within(sending: asyncio.Future[tuple[bool, asyncio.Future[None] | None]],
                       grace_s: float) -> bool:
    """Whether the reply was delivered and both copies of its record written, without
    error, within ``grace_s``."""
    loop = asyncio.get_running_loop()
    ends = loop.time() + grace_s
    await asyncio.wait({sending}, timeout=grace_s)
    if not (sending.done() and not sending.cancelled() and sending.exception() is None
            and sending.result()[0]):
        return False
    durable = sending.result()[1]
    if durable is None:
        return True
    await asyncio.wait({durable}, timeout=max(0.0, ends - loop.time()))
    return durable.done()
