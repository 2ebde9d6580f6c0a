"""One request from the query topic to its reply: what the query consumer runs
for every record it takes.

1. A record older than any caller waits is skipped unread; the processor skips
   one older than its own ``timeout_ms`` (:mod:`streams.query.expiry`). Both are
   counted (``memstream_query_expired_total``).
2. A request whose reply was sent before (a redelivery after a crash) is not
   answered again (``memstream_query_duplicates_total``); ``maybe_seen`` (the
   consumer's) says which requests may have been delivered before.
3. Otherwise the processor's answer is delivered — the reply on the no-linger
   reply producer, then remembered as answered; a dead letter durably, retried
   until the broker takes it — and only then does the request count as answered.

Nothing here raises (but cancellation): the consumer may then commit past it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from streams.adapters.kafka.publish import Outgoing, Publisher, SourceRecord
from streams.backoff import retry_forever
from streams.metrics import QUERY_DUPLICATES
from streams.query.answered import AnsweredRequests
from streams.query.processor import QueryProcessor
from streams.wire.spring_reply import BadReplyHeaders, ReplyAddress, reply_address

DeliverReply = Callable[[Outgoing], Awaitable[bool]]


def _address(rec: SourceRecord) -> ReplyAddress | None:
    try:
        return reply_address(rec.headers)
    except BadReplyHeaders:
        return None  # dead-lettered by the processor


class QueryAnswering:
    def __init__(self, processor: QueryProcessor, deliver_reply: DeliverReply,
                 dead_letters: Publisher, answered: AnsweredRequests, *,
                 retry_initial_s: float, retry_max_s: float,
                 maybe_seen: Callable[[SourceRecord], bool] = lambda rec: True) -> None:
        self.processor = processor
        self.deliver_reply = deliver_reply
        self.dead_letters = dead_letters
        self.answered = answered
        self.retry_initial_s = retry_initial_s
        self.retry_max_s = retry_max_s
        self.maybe_seen = maybe_seen

    async def __call__(self, rec: SourceRecord) -> None:
        if self.processor.outdated(rec):
            return
        addr = _address(rec)
        cid = addr.correlation_id if addr is not None else None
        if addr is not None and cid is not None and await self.answered.answered(
                addr.topic, cid, maybe_seen=self.maybe_seen(rec)):
            QUERY_DUPLICATES.inc()
            return
        answer = await self.processor.handle(rec)
        if answer.reply is not None and await self.deliver_reply(answer.reply) and cid is not None:
            await self.answered.remember(answer.reply.topic, cid)
        if answer.dead_letter is not None:
            dead = [answer.dead_letter]
            await retry_forever(lambda: self.dead_letters.publish(dead), what="dlq",
                                initial_s=self.retry_initial_s, max_s=self.retry_max_s)
