"""QueryProcessor: one request record in, one reply (or one dead letter) out.

Every request that names a reply topic gets a reply — also a malformed one,
with ``error`` set — unless its caller has given up: a request older than its
``options.timeout_ms`` (:mod:`streams.query.expiry`) is counted and not
answered. A request that names no usable reply topic cannot be answered; it
goes to the dead-letter topic with the reason, never silence. So does one
whose reply topic :class:`~streams.query.rules.reply_targets.ReplyTargets`
refuses (``reply_topic_not_allowed``): nothing is written there, and nothing
of the request is read. With :class:`Signing`, a request not signed with its
tenant's key gets an ``unauthorized`` error reply carrying its ``request_id``
only. With a :class:`~streams.quotas.book.QuotaBook`, a valid, signed, awaited
request over its tenant's ``queries`` quota gets an ``over_quota`` error reply
without engine work — unless it was answered before (a redelivery, or a request
another worker took over), which the answered-request record is asked first, so
a caller never gets a refusal after its answer. A request counts against the
quota of the worker that answers it, once: one answered while the record is asked
(``likely_new``) is counted allowed once the record says it is new, and gives its
token back if it was answered before. :meth:`QueryProcessor.shed` refuses a request
the query consumer cannot take now (its tenant has more requests waiting than it
may queue) the same way, ``over_quota`` without engine work, whatever the quota.
With a :class:`~streams.quotas.load_share.LoadShare`, so is a request of a tenant
that had most of the queries this worker answered lately, while the worker is
loaded (counted ``overloaded`` in its tenant's ``queries`` decisions).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from streams import tracing
from streams.metrics import (
    DEAD_LETTERS,
    QUERY_EXPIRED,
    QUERY_EXPIRED_AGE,
    QUERY_LATENCY,
    QUERY_REPLIES,
)
from streams.query.answered import request_key
from streams.query.expiry import beyond_any_timeout, caller_gave_up
from streams.query.ports import MemoryLookup
from streams.query.rules.reply_targets import ReplyTargets
from streams.quotas.book import ALLOWED, OVERLOADED, Decision, QuotaBook
from streams.quotas.load_share import LoadShare
from streams.wire.dead_letter import dead_letter
from streams.wire.envelope import DeadLettered, Handled, Outgoing, SourceRecord, ToSend
from streams.wire.headers import ANSWERED_PARTITION, SIGNED_AT, header
from streams.wire.json_doc import load_object
from streams.wire.query import MemoryQuery, MemoryReply, ReplyError, Warning_, unknown_fields
from streams.wire.rejections import Rejected
from streams.wire.signing import Signing
from streams.wire.spring_reply import BadReplyHeaders, ReplyAddress, reply_address

log = logging.getLogger(__name__)
# kept out of what the parts may take: the reply assembled and sent after they end (some
# turns of the loop, each longer while the worker catches up) and its way to its caller
REPLY_WAY_S = 0.1
MIN_BUDGET_S = 0.05
LATE_LOG_EVERY_S = 1.0  # replies after their deadline: at most one line a second
_ERROR_CLASS = {"no_reply_topic": "NoReplyTopic", "bad_reply_headers": "BadReplyHeaders",
                "reply_topic_not_allowed": "ReplyTopicNotAllowed"}


ANSWERED, EXPIRED, DUPLICATE, LEFT, REFUSED = (
    "answered", "expired", "duplicate", "left", "refused")
"""What :meth:`QueryProcessor.handle` says of a request it sends nothing for
(``expired``: its caller gave up; ``duplicate``: its reply was sent before), or
of one it replies to (``answered``: the reply is the one record to send;
``refused``: its reply is an ``over_quota`` refusal, not recorded as an answer);
:meth:`QueryProcessor.rescue` says ``left`` of a request it leaves to its
partition's owner."""
LEFT_ALONE = ToSend(outcome=LEFT)


@dataclass(frozen=True, slots=True)
class _Admitted:
    """A request that gets the engine's answer: valid, allowed, signed, awaited."""

    addr: ReplyAddress
    query: MemoryQuery
    doc: dict[str, Any]
    key: str
    over_quota: str | None = None  # why its tenant's quota refuses it, if it does
    overloaded: bool = False  # refused because the worker is loaded and its tenant heavy


def _short_errors(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:3]:
        loc = ".".join(str(p) for p in err["loc"]) or "request"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


class QueryProcessor:
    def __init__(self, engine: MemoryLookup, dlq_topic: str, *,
                 clock: Callable[[], float] = time.time,
                 reply_targets: ReplyTargets | None = None,
                 signing: Signing | None = None, quotas: QuotaBook | None = None,
                 load: LoadShare | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.engine = engine
        self.dlq_topic = dlq_topic
        self.clock = clock
        self.reply_targets = reply_targets
        self.signing = signing
        self.quotas = quotas
        self.load = load
        self.monotonic = monotonic
        self._late_told = float("-inf")

    def outdated(self, rec: SourceRecord) -> bool:
        """Older than any caller waits: skipped (and counted) without reading it."""
        if beyond_any_timeout(rec.timestamp, self.clock()):
            assert rec.timestamp is not None
            self._expired("", rec.timestamp)
            return True
        return False

    def _expired(self, tenant_id: str, produced_at: float) -> ToSend:
        """Not answered: its caller has given up. Counted by tenant, with its age."""
        QUERY_EXPIRED.labels(tenant_id).inc()
        QUERY_EXPIRED_AGE.observe(self.clock() - produced_at)
        return ToSend(outcome=EXPIRED)

    def _dead(self, rec: SourceRecord, reason: str, message: str) -> DeadLettered:
        DEAD_LETTERS.labels("query", reason).inc()
        return DeadLettered(dead_letter(
            rec, dlq_topic=self.dlq_topic, stage="query", reason=reason,
            error_class=_ERROR_CLASS[reason],
            message=message,
        ), reason)

    def _reply(self, rec: SourceRecord, addr: ReplyAddress, reply: MemoryReply) -> ToSend:
        """The reply, with the partition the request was read from (a hedged request has
        two copies: its caller tells which one was answered)."""
        body = reply.model_dump_json(exclude_none=False).encode()
        headers = [*addr.headers(), (ANSWERED_PARTITION, str(rec.partition).encode())]
        return ToSend((Outgoing(addr.topic, rec.key, body, headers, addr.partition),), ANSWERED)

    async def handle(self, rec: SourceRecord,
                     sent_before: Callable[[ReplyAddress, str], Awaitable[bool]] | None = None,
                     *, likely_new: bool = False) -> Handled:
        """A reply to send (``ToSend``, outcome ``answered``), nothing (``ToSend`` with
        outcome ``expired`` or ``duplicate``), or a dead letter (``DeadLettered``).
        ``sent_before``: asked, with the request's key
        (:func:`~streams.query.answered.request_key`), once a valid request is known to
        get a reply (its reply topic allowed, its caller still waiting, its signature
        good), before any reply is sent; True: the reply went out before, nothing is
        sent (``duplicate``). A refused request (unreadable, unsigned) is never asked
        about: its error reply is not recorded, so it cannot stand for another request.
        For a valid request ``likely_new`` (not delivered before as far as the consumer
        knows) the engine's answer is made while the question is out — its round trip is
        then off the caller's wait — and dropped should it be a duplicate after all
        (stopped, and waited for until it has unwound, as when the request is cancelled);
        any other request is answered only once the question is settled. The reply is
        counted (``memstream_query_replies_total``, latency) only when it is to be sent."""
        start = time.perf_counter()
        admitted = self._admit(rec, start, quiet=False)
        if not isinstance(admitted, _Admitted):
            return admitted
        return await self._answer_admitted(rec, admitted, start, sent_before, likely_new)

    async def rescue(self, rec: SourceRecord, take_over: Callable[[ReplyAddress, str],
                                                                  Awaitable[bool]]) -> Handled:
        """A request read outside its partition's owner (:mod:`streams.query.rescue`):
        answered as :meth:`handle` would — a ``ToSend`` with the reply — only when it is
        valid, still awaited and ``take_over`` (asked with its reply address and key)
        says this worker takes it over. Anything else — a request to dead-letter, to
        refuse or past its deadline, or one taken by another — is left to its partition's
        owner (``ToSend``, outcome ``left``), neither sent, counted nor logged here, so
        that nothing is done twice. So is a request over its tenant's quota here; one
        taken over counts against the quota here, where it is answered."""
        start = time.perf_counter()
        admitted = self._admit(rec, start, quiet=True)
        if not isinstance(admitted, _Admitted):
            return ToSend(outcome=LEFT)

        async def taken_before(addr: ReplyAddress, key: str) -> bool:
            return not await take_over(addr, key)

        handled = await self._answer_admitted(rec, admitted, start, taken_before, False)
        return ToSend(outcome=LEFT) if handled.outcome == DUPLICATE else handled

    async def shed(self, rec: SourceRecord,
                   sent_before: Callable[[ReplyAddress, str], Awaitable[bool]] | None = None,
                   ) -> Handled:
        """A request the query consumer cannot take now: for a valid, signed, awaited
        request an ``over_quota`` error reply (outcome ``refused``, saying its tenant's
        requests exceed what this worker can take now) without engine work, counted
        ``shed`` in its tenant's ``queries`` decisions (its quota is not taken from);
        ``duplicate`` when ``sent_before`` says it was answered before (a caller never
        gets a refusal after its answer). Any other request gets what :meth:`handle`
        gives it (a dead letter, an error reply, nothing when its caller gave up)."""
        start = time.perf_counter()
        admitted = self._admit(rec, start, quiet=False)
        if not isinstance(admitted, _Admitted):
            return admitted
        if sent_before is not None and await sent_before(admitted.addr, admitted.key):
            return ToSend(outcome=DUPLICATE)
        tenant = admitted.query.tenant_id
        if self.quotas is not None:
            self.quotas.shed(tenant)
        return self._over_quota(rec, admitted.addr, admitted.query, (
            f"the requests of tenant {tenant!r} exceed what this worker can take now: "
            "more are waiting than its share of the worker's queue; retry later"), start)

    def _admit(self, rec: SourceRecord, start: float, *, quiet: bool) -> Handled | _Admitted:
        """The request, valid, allowed, signed and awaited, with its key; else what it
        gets instead (``quiet``: ``left``, with nothing counted or logged)."""
        try:
            addr = reply_address(rec.headers)
        except BadReplyHeaders as exc:
            return LEFT_ALONE if quiet else self._dead(rec, "bad_reply_headers", str(exc))
        if addr is None:
            return LEFT_ALONE if quiet else self._dead(
                rec, "no_reply_topic", "the request has no kafka_replyTopic header")
        if self.reply_targets is not None and (
                why := self.reply_targets.refusal(addr.topic)) is not None:
            if quiet:
                return LEFT_ALONE
            log.warning("query reply to %r refused: %s", addr.topic, why)
            return self._dead(rec, "reply_topic_not_allowed", f"{why}: {addr.topic}")
        doc = load_object(rec.value)
        problem: str | None = None
        if isinstance(doc, Rejected):
            problem = f"not a JSON object memstream can read ({doc.reason}): {doc.message}"
        else:
            try:
                query = MemoryQuery.model_validate(doc)
            except ValidationError as exc:
                problem = _short_errors(exc)
            else:
                if caller_gave_up(rec.timestamp, self.clock(), query.options.timeout_ms):
                    assert rec.timestamp is not None
                    return LEFT_ALONE if quiet else self._expired(query.tenant_id,
                                                                  rec.timestamp)
        why = None
        if problem is None and self.signing is not None:
            why = self.signing.refusal(query.tenant_id, rec.headers, rec.value, addr.topic,
                                       self.clock())
            signed_at = header(rec.headers, SIGNED_AT)
            if why is None and signed_at is not None and caller_gave_up(
                    int(signed_at) + 1, self.clock(), query.options.timeout_ms):
                # the signed time, not the record's: a captured request sent again later
                # is as old as its signature says
                return LEFT_ALONE if quiet else self._expired(query.tenant_id, int(signed_at))
        if problem is not None or why is not None:
            if quiet:
                return LEFT_ALONE
            if problem is not None:
                return self._error(rec, addr, None if isinstance(doc, Rejected) else doc,
                                   problem, start)
            log.warning("query %s of tenant %r refused: %s", query.request_id, query.tenant_id,
                        why)
            QUERY_REPLIES.labels("error").inc()
            return self._reply(rec, addr, MemoryReply(
                request_id=query.request_id, error=ReplyError(code="unauthorized", message=why)))
        assert not isinstance(doc, Rejected)
        tracing.annotate({tracing.TENANT: query.tenant_id})
        over: str | None = None
        overloaded = False
        if self.quotas is not None:
            decision = self.quotas.peek(query.tenant_id, self.clock())
            if not decision.allowed:
                if quiet:
                    return LEFT_ALONE
                over = decision.message
        if over is None and self.load is not None and self.load.refuses(
                query.tenant_id, self.monotonic()):
            if quiet:
                return LEFT_ALONE
            over, overloaded = self.load.message(query.tenant_id), True
        key = request_key(query.tenant_id, addr.topic, addr.partition,
                          addr.correlation_id or b"", rec.value or b"")
        return _Admitted(addr, query, doc, key, over, overloaded)

    def _take_quota(self, tenant_id: str) -> Decision | None:
        """Take this request's token from its tenant's quota (None: no quotas), counting
        nothing: :meth:`_count_answered` counts it once it is known to be answered."""
        if self.quotas is None:
            return None
        return self.quotas.take(tenant_id, self.clock(), count=False)

    def _count_answered(self, tenant_id: str) -> None:
        if self.quotas is not None:
            self.quotas.count(tenant_id, ALLOWED)
        if self.load is not None:
            self.load.answered(tenant_id, self.monotonic())

    def _refused(self, rec: SourceRecord, a: _Admitted, message: str, start: float) -> ToSend:
        """The request refused over its tenant's quota, counted as such."""
        assert self.quotas is not None
        self.quotas.count(a.query.tenant_id, self.quotas.over_quota(a.query.tenant_id))
        return self._over_quota(rec, a.addr, a.query, message, start)

    async def _answer_admitted(
            self, rec: SourceRecord, a: _Admitted, start: float,
            sent_before: Callable[[ReplyAddress, str], Awaitable[bool]] | None,
            likely_new: bool) -> ToSend:
        settled = True  # known not to be a duplicate
        if a.over_quota is not None:
            # refused only if it was not answered before (a redelivery, a copy taken
            # over by another worker): a caller never gets a refusal after its answer
            if sent_before is not None and await sent_before(a.addr, a.key):
                return ToSend(outcome=DUPLICATE)
            if a.overloaded:
                if self.quotas is not None:
                    self.quotas.count(a.query.tenant_id, OVERLOADED)
                return self._over_quota(rec, a.addr, a.query, a.over_quota, start)
            decision = self._take_quota(a.query.tenant_id)
            if decision is None:
                return self._over_quota(rec, a.addr, a.query, a.over_quota, start)
            if not decision.allowed:
                return self._refused(rec, a, a.over_quota, start)
            self._count_answered(a.query.tenant_id)
        elif sent_before is not None and not likely_new and await sent_before(a.addr, a.key):
            return ToSend(outcome=DUPLICATE)
        else:
            # asked while answering: the token is taken now, the decision counted once
            # the request is known not to be a duplicate, and given back if it is one
            settled = sent_before is None or not likely_new
            taken = self._take_quota(a.query.tenant_id)
            if taken is not None and not taken.allowed:  # spent by another meanwhile
                # refused, as any request over the quota, if it was not answered before
                if sent_before is not None and not settled and await sent_before(a.addr,
                                                                                 a.key):
                    return ToSend(outcome=DUPLICATE)
                return self._refused(rec, a, taken.message, start)
            if settled:
                self._count_answered(a.query.tenant_id)
        answering = asyncio.ensure_future(self._answer(a.query, self._budget(rec, a.query)))
        try:
            if not settled:
                assert sent_before is not None
                if await sent_before(a.addr, a.key):
                    return ToSend(outcome=DUPLICATE)
                settled = True
                self._count_answered(a.query.tenant_id)
            reply = await answering
        finally:
            if not settled and self.quotas is not None:  # a duplicate, or cancelled
                self.quotas.give_back(a.query.tenant_id, self.clock())
            if not answering.done():  # a duplicate's, or the request cancelled: stopped,
                answering.cancel()  # and unwound before the request is done
                await asyncio.wait([answering])
        if reply.latency_ms is not None:
            QUERY_LATENCY.observe(reply.latency_ms / 1000)
        QUERY_REPLIES.labels("error" if reply.error is not None else
                             "partial" if reply.warnings else "ok").inc()
        self._tell_if_late(rec, a.query, time.perf_counter() - start)
        if ignored := unknown_fields(a.doc):
            reply.warnings.append(Warning_(
                code="unknown_fields", message="ignored: " + ", ".join(ignored[:20])))
        return self._reply(rec, a.addr, reply)

    def _tell_if_late(self, rec: SourceRecord, query: MemoryQuery, handled_s: float) -> None:
        """A reply that leaves after its caller's deadline is logged, at most one line every
        ``LATE_LOG_EVERY_S``, with where the time went: before this worker took the
        request up (the broker, the consumer's queue, a rebalance) or in handling it
        (``handled_s``: answering, and asking whether it was answered before)."""
        now, told = self.clock(), time.monotonic()
        if not caller_gave_up(rec.timestamp, now, query.options.timeout_ms) \
                or told - self._late_told < LATE_LOG_EVERY_S:
            return
        assert rec.timestamp is not None
        age_s = now - rec.timestamp
        self._late_told = told
        log.info("query %r of tenant %r answered %.0f ms after it was sent (deadline %d ms): "
                 "taken up after %.0f ms, handled in %.0f ms", query.request_id,
                 query.tenant_id, age_s * 1000, query.options.timeout_ms,
                 max(0.0, age_s - handled_s) * 1000, handled_s * 1000)

    def _budget(self, rec: SourceRecord, query: MemoryQuery) -> float:
        """What is left of the caller's wait, less the reply's way back: each part of the
        answer gets that long (at least ``MIN_BUDGET_S``), so that a request taken late
        is answered, with what could be found, while its caller still waits."""
        timeout = query.options.timeout_ms / 1000
        if rec.timestamp is None or rec.timestamp <= 0:
            return timeout
        left = timeout - max(0.0, self.clock() - rec.timestamp) - REPLY_WAY_S
        return min(timeout, max(MIN_BUDGET_S, left))

    async def _answer(self, query: MemoryQuery, budget_s: float) -> MemoryReply:
        """The engine's reply; an internal error reply when it fails (a reply always
        comes back)."""
        try:
            return await self.engine.answer(query, budget_s)
        except Exception as exc:
            log.exception("query failed")
            return MemoryReply(request_id=query.request_id, tenant_id=query.tenant_id,
                               user_id=query.user_id, agent_id=query.agent_id,
                               error=ReplyError(code="internal", message=type(exc).__name__))

    def _over_quota(self, rec: SourceRecord, addr: ReplyAddress, query: MemoryQuery,
                    message: str, start: float) -> ToSend:
        reply = MemoryReply(
            request_id=query.request_id, tenant_id=query.tenant_id, user_id=query.user_id,
            agent_id=query.agent_id, conversation_id=query.conversation_id,
            error=ReplyError(code="over_quota", message=message),
            latency_ms=round((time.perf_counter() - start) * 1000, 3))
        QUERY_REPLIES.labels("error").inc()
        return ToSend(self._reply(rec, addr, reply).records, REFUSED)

    def _error(self, rec: SourceRecord, addr: ReplyAddress, doc: object, message: str,
               start: float) -> ToSend:
        ids = doc if isinstance(doc, dict) else {}
        reply = MemoryReply(
            request_id=_str(ids.get("request_id")), tenant_id=_str(ids.get("tenant_id")),
            user_id=_str(ids.get("user_id")), agent_id=_str(ids.get("agent_id")),
            error=ReplyError(code="bad_request", message=message),
            latency_ms=round((time.perf_counter() - start) * 1000, 3),
        )
        QUERY_REPLIES.labels("error").inc()
        QUERY_LATENCY.observe(reply.latency_ms / 1000)
        return self._reply(rec, addr, reply)


def _str(v: object, limit: int = 255) -> str | None:
    """An id to echo in an error reply: only a string of id length."""
    return v if isinstance(v, str) and len(v) <= limit else None
