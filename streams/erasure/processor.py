"""ErasureProcessor: one request record from ``memory.erasures`` in, a receipt (or a
dead letter) out.

A request naming a reply topic (the Spring headers of a query) gets a receipt,
also a bad one (``status: rejected`` and the reason); one naming a topic the
reply rules refuse is dead-lettered unread and nothing is erased. A request that
cannot be answered (no reply topic) and cannot be carried out (malformed,
unknown memory, refused signature) is dead-lettered, never dropped. An erasure a
provider blocks for good, one whose statement the database refuses for good
(``error.code: database``: a constraint, a value a column cannot hold), or one a
fault of memstream's own stops (``status: blocked``), is answered and dead-lettered
both, its record marked ``blocked`` with the error, and the erasures behind it go
on: ``memstream replay`` re-drives it once the cause is fixed, and it starts
again. An outage (the database, Redis, Kafka, a provider's 5xx) is waited out —
within the erasure's turn (:class:`~streams.erasure.executor.ErasureExecutor`):
past it, or when a rebalance or a shutdown begins, the request is produced to the
end of the queue again (``requeued``; signed afresh when requests are signed) and
the next delivery continues it. With :class:`~streams.wire.signing.Signing`, a
request must be signed with its tenant's key, as a query.

A request whose record key is not ``{tenant_id}/{erasure_id}`` of its body is refused
as a bad request is (``rejected``, error ``bad_request``; without a reply topic
dead-lettered ``erasure_bad_request``) and nothing is erased: on the compacted topic
such a record could replace another request, another tenant's included.

With ``quotas`` (the ``erasures`` quota, a minute), a request whose erasure is not
in the erasure log yet (a new erasure, or a dry run) takes one from its tenant's
quota; over it, it is refused at once, as a bad request is (``rejected``, error
``over_quota`` saying when to retry; without a reply topic dead-lettered
``erasure_over_quota``): nothing is erased or recorded, and the same request may be
sent again. An erasure begun already (requeued at the end of its turn, blocked and
replayed, or repeated) is never refused.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pydantic import ValidationError

from streams import tracing
from streams.backoff import retry_forever
from streams.erasure.executor import (
    ErasureExecutor,
    ErasureRefused,
    ErasureReleased,
    refusal,
    transient,
)
from streams.memory.provider import PermanentProviderError
from streams.metrics import (
    DEAD_LETTERS,
    ERASURE_BLOCKED,
    ERASURE_KEY_MISMATCHES,
    ERASURE_SECONDS,
    ERASURES,
)
from streams.query.rules.reply_targets import ReplyTargets
from streams.quotas.book import QuotaBook
from streams.redaction import error_text
from streams.stores import StoreRefused
from streams.wire.dead_letter import dead_letter
from streams.wire.envelope import DeadLettered, Handled, Outgoing, SourceRecord, ToSend
from streams.wire.erasure import ErasureError, ErasureReceipt, ErasureRequest
from streams.wire.json_doc import load_object
from streams.wire.rejections import SCHEMA, Rejected
from streams.wire.signing import Signing
from streams.wire.spring_reply import BadReplyHeaders, ReplyAddress, reply_address

log = logging.getLogger(__name__)
T = TypeVar("T")
REQUEUED = "requeued"
"""The outcome of a request let go before its erasure finished: ``ToSend`` holds its
copy, to be produced to the erasure topic before the request is acknowledged."""


class ErasureProcessor:
    def __init__(self, executor: ErasureExecutor, dlq_topic: str, *,
                 reply_targets: ReplyTargets | None = None, signing: Signing | None = None,
                 clock: Callable[[], float] = time.time, retry_initial_s: float = 0.2,
                 retry_max_s: float = 10.0, quotas: QuotaBook | None = None) -> None:
        self.executor = executor
        self.quotas = quotas
        self.retry_initial_s = retry_initial_s
        self.retry_max_s = retry_max_s
        self.dlq_topic = dlq_topic
        self.reply_targets = reply_targets
        self.signing = signing
        self.clock = clock

    def _dead(self, rec: SourceRecord, reason: str, error_class: str, message: str,
              receipt: Outgoing | None = None) -> DeadLettered:
        DEAD_LETTERS.labels("erasure", reason).inc()
        return DeadLettered(dead_letter(rec, dlq_topic=self.dlq_topic, stage="erasure",
                                        reason=reason, error_class=error_class,
                                        message=message),
                            reason, () if receipt is None else (receipt,))

    @staticmethod
    def _receipt(rec: SourceRecord, addr: ReplyAddress | None,
                 receipt: ErasureReceipt) -> Outgoing | None:
        if addr is None:
            return None
        body = receipt.model_dump_json().encode()
        return Outgoing(addr.topic, rec.key, body, addr.headers(), addr.partition)

    async def handle(self, rec: SourceRecord) -> Handled:
        """The receipt to send (``ToSend``: none when no reply topic is named; the
        outcome ``done``, ``repeated``, ``dry_run`` or ``rejected``), or a dead letter
        (``DeadLettered``, with the receipt of a ``blocked`` erasure); each record to
        send carries the trace context of the erasure's span."""
        with tracing.consumer_span(f"process {rec.topic}", rec.headers,
                                   tracing.kafka_attributes(rec.topic, rec.partition,
                                                            rec.offset)) as span:
            handled = await self._handle(rec)
            span.set_attribute(tracing.OUTCOME, handled.outcome
                               if isinstance(handled, ToSend) else "dead_lettered")
            return tracing.stamped(handled)

    async def _handle(self, rec: SourceRecord) -> Handled:
        try:
            addr = reply_address(rec.headers)
        except BadReplyHeaders as exc:
            return self._dead(rec, "bad_reply_headers", "BadReplyHeaders", str(exc))
        if addr is not None and self.reply_targets is not None and (
                why := self.reply_targets.refusal(addr.topic)) is not None:
            log.warning("erasure receipt to %r refused: %s", addr.topic, why)
            return self._dead(rec, "reply_topic_not_allowed", "ReplyTopicNotAllowed",
                              f"{why}: {addr.topic}")
        doc = load_object(rec.value)
        try:
            if isinstance(doc, Rejected):
                raise ErasureRefused("bad_request", f"not a JSON object memstream can read "
                                     f"({doc.reason}): {doc.message}")
            try:
                req = ErasureRequest.model_validate(doc)
            except ValidationError as exc:
                raise ErasureRefused("bad_request", "; ".join(
                    f"{'.'.join(map(str, e['loc'])) or 'request'}: {e['msg']}"
                    for e in exc.errors()[:3])) from exc
        except ErasureRefused as exc:
            return self._refused(rec, addr, None, exc, reason=SCHEMA)
        tracing.annotate({tracing.TENANT: req.tenant_id})
        if rec.key != req.key():
            log.warning("erasure %s of tenant %r refused: its key is not the one its body "
                        "gives", req.erasure_id, req.tenant_id)
            ERASURE_KEY_MISMATCHES.inc()
            return self._refused(rec, addr, req, ErasureRefused("bad_request", (
                f"the record's key must be {req.key().decode()!r} ({{tenant_id}}/"
                f"{{erasure_id}} of its body), not "
                f"{_shown(rec.key)}: on the compacted topic it would replace another "
                "request")))
        if self.signing is not None and (why := self.signing.refusal(
                req.tenant_id, rec.headers, rec.value, addr.topic if addr else "",
                self.clock())) is not None:
            log.warning("erasure %s of tenant %r refused: %s", req.erasure_id, req.tenant_id, why)
            return self._refused(rec, addr, req, ErasureRefused("unauthorized", why))
        return await self._carry_out(rec, addr, req)

    async def _carry_out(self, rec: SourceRecord, addr: ReplyAddress | None,
                         req: ErasureRequest) -> Handled:
        """The erasure (or its dry run) until it is done, refused or blocked: an outage
        is waited out (every step is idempotent); a failure no attempt can heal (a
        provider refusing for good or not configured, a fault of memstream's own) is
        answered ``blocked`` and dead-lettered, so ``memstream replay`` continues it
        once the cause is fixed."""
        started = time.perf_counter()
        known = None
        self.executor.start_turn()
        try:
            if req.dry_run:
                self._take_quota(req)
                receipt = await self._retry(lambda: self.executor.dry_run(req))
                outcome = "dry_run"
            else:
                known = await self._retry(
                    lambda: self.executor.log.get(req.tenant_id, req.erasure_id))
                if known is None:
                    self._take_quota(req)
                receipt = await self._retry(lambda: self.executor.erase(req))
                outcome = "repeated" if known is not None and known.status == "done" else "done"
                ERASURE_SECONDS.observe(time.perf_counter() - started)
        except ErasureRefused as exc:
            return self._refused(rec, addr, req, exc)
        except ErasureReleased as exc:
            ERASURES.labels(req.target, REQUEUED).inc()
            log.info("erasure %s of tenant %r: its turn is over (%s), continued from the end "
                     "of the queue", req.erasure_id, req.tenant_id, exc.reason)
            return ToSend((self._requeue(rec, addr, req),), REQUEUED)
        except Exception as exc:  # an answer and a dead letter, never a stopped agent
            ERASURES.labels(req.target, "blocked").inc()
            message = error_text(exc)
            code = ("database" if isinstance(exc, StoreRefused) else
                    "provider" if isinstance(exc, PermanentProviderError) else "internal")
            ERASURE_BLOCKED.labels(code).inc()
            log.error("erasure %s blocked: %s", req.erasure_id, message,
                      exc_info=exc if code == "internal" else None)
            receipt = ErasureReceipt(
                erasure_id=req.erasure_id, tenant_id=req.tenant_id, target=req.target,
                subject=req.subject, status="blocked",
                error=ErasureError(code=code, message=message))
            return self._dead(rec, "erasure_blocked", type(exc).__name__, message,
                              self._receipt(rec, addr, receipt))
        ERASURES.labels(req.target, outcome).inc()
        return _to_send(self._receipt(rec, addr, receipt), outcome)

    def _take_quota(self, req: ErasureRequest) -> None:
        """Count a new request against its tenant's ``erasures`` quota; over it, the
        request is refused (``over_quota``) before anything is erased or recorded."""
        if self.quotas is None:
            return
        decision = self.quotas.take(req.tenant_id, self.clock())
        if not decision.allowed:
            log.warning("erasure %s refused: %s", req.erasure_id, decision.message)
            raise ErasureRefused("over_quota", decision.message)

    async def _retry(self, call: Callable[[], Awaitable[T]]) -> T:
        """``call`` until it passes, within the turn; what is not an outage is raised
        at once."""
        return await retry_forever(call, what="erasure", initial_s=self.retry_initial_s,
                                   max_s=self.retry_max_s, sleep=self.executor.pause,
                                   give_up=lambda exc: not transient(exc))

    def _requeue(self, rec: SourceRecord, addr: ReplyAddress | None,
                 req: ErasureRequest) -> Outgoing:
        """The request as it came (key, value, headers: the receipt goes where it was
        asked to), signed again now when requests are signed, so that its signature is
        fresh whenever it comes back."""
        headers = list(rec.headers)
        if self.signing is not None:
            headers = self.signing.signed_again(req.tenant_id, headers, rec.value or b"",
                                                addr.topic if addr else "", self.clock())
        return Outgoing(rec.topic, rec.key, rec.value, headers)

    def _refused(self, rec: SourceRecord, addr: ReplyAddress | None, req: ErasureRequest | None,
                 exc: ErasureRefused, *, reason: str | None = None) -> Handled:
        """A receipt saying why; with no reply topic, a dead letter (``reason``, by
        default ``erasure_<code>``)."""
        ERASURES.labels(req.target if req else "unknown", "rejected").inc()
        if addr is not None:
            return _to_send(self._receipt(rec, addr, refusal(req, exc)), "rejected")
        return self._dead(rec, reason or f"erasure_{exc.code}", "ErasureRefused", str(exc))


def _shown(key: bytes | None) -> str:
    if key is None:
        return "none"
    return repr(key.decode(errors="replace")[:140])


def _to_send(receipt: Outgoing | None, outcome: str) -> ToSend:
    return ToSend(() if receipt is None else (receipt,), outcome)
