"""MemoryClient: ask memstream for memory over Kafka, from any Python service.

    async with MemoryClient("localhost:9092") as client:
        reply = await client.query(tenant_id="acme", user_id="alice",
                                   agent_id="travel-planner", message="Where am I going?")
        print(reply.user_profile, reply.memories)

Requests go to ``memory.queries`` keyed ``tenant/user`` with the headers of
Spring Kafka's ReplyingKafkaTemplate (``kafka_replyTopic``,
``kafka_correlationId``, ``kafka_replyPartition``). The client reads one
partition of its reply topic (``memory.replies`` unless given) and matches
replies by correlation id, so many clients may share the topic.

Hedged queries: a query not answered within ``hedge_after_s`` (default 0.25 s,
above the undisturbed p99) is sent once more, with the same correlation id and
timestamp, to a partition held by another member of the query group (its
current assignment is read from the broker, ``query_group``). The first reply
wins; a second reply is dropped and counted. A worker that dies therefore holds
a query up by ``hedge_after_s``, not by the query group's session timeout. At
most half of the queries are hedged over time (20 at once): when every worker
is slow, hedging adds half the load, not all of it.
``stats`` counts what the client saw; ``on_outcome`` is called once per query.

A query or an erasure asked inside an OpenTelemetry span carries its W3C trace
context: memstream's spans continue the caller's trace (docs/observability.md).

A secured cluster: pass ``security=KafkaSecurity(protocol="SASL_SSL",
sasl_mechanism="SCRAM-SHA-512", username=..., password=..., cafile=...)``
(:mod:`streams.adapters.kafka.security`). With ``signing_key`` (the tenant's
key) every query and erasure is signed (:mod:`streams.wire.signing`), its
correlation id and reply partition included; a hedge's copy carries the same
signature.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import TopicAlreadyExistsError

from streams import tracing
from streams.adapters.kafka.bootstrap import bootstrap_servers
from streams.adapters.kafka.security import PLAINTEXT, KafkaSecurity
from streams.client_routes import GroupOwners, hedge_partition
from streams.wire.erasure import ErasureReceipt, ErasureRequest, ErasureTarget
from streams.wire.headers import ANSWERED_PARTITION, SIGNATURE, SIGNED_AT, header
from streams.wire.query import MemoryQuery, MemoryReply, QueryOptions
from streams.wire.signing import signed_headers
from streams.wire.spring_reply import CORRELATION_ID, request_headers


class QueryTimeoutError(TimeoutError):
    """No reply arrived within the client's timeout."""


class ClientClosedError(RuntimeError):
    """The client was closed before the reply came (or before the request was sent)."""


ERASE_TIMEOUT_S = 300.0  # an erasure waits for every ingest partition and every provider
HEDGE_AFTER_S = 0.25
HEDGE_SHARE = 0.5  # hedges at most this share of queries, over time ...
HEDGE_BURST = 20.0  # ... and this many at once: when every worker is slow, load grows 1.5x, not 2x
REMEMBERED_REPLIES = 4096  # correlation ids answered lately: a second reply to one is a duplicate


@dataclass
class ClientStats:
    """What one client saw, since it started."""

    queries: int = 0
    answered: int = 0
    """Replies received within the caller's timeout."""
    timed_out: int = 0
    hedges_sent: int = 0
    hedges_won: int = 0
    """Replies that came from the hedge's partition."""
    hedges_withheld: int = 0
    """Queries past ``hedge_after_s`` not hedged: the hedge budget was spent."""
    duplicates_dropped: int = 0
    """Second replies to a query already answered (the other copy's), not passed on."""


@dataclass(frozen=True)
class QueryOutcome:
    """One query, as its caller saw it."""

    latency_s: float
    answered: bool
    hedged: bool
    hedge_won: bool
    partition: int | None = None
    """The partition of the query topic the first copy went to."""


class MemoryClient:
    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        request_topic: str = "memory.queries",
        erasures_topic: str = "memory.erasures",
        reply_topic: str = "memory.replies",
        reply_partitions: int = 8,
        reply_partition: int | None = None,
        timeout_s: float = 5.0,
        security: KafkaSecurity = PLAINTEXT,
        signing_key: str | None = None,
        hedge_after_s: float | None = HEDGE_AFTER_S,
        query_group: str | None = "memstream-query",
        on_outcome: Callable[[QueryOutcome], None] | None = None,
    ) -> None:
        self.servers = bootstrap_servers(bootstrap)
        self._options = security.client_options()
        self.signing_key = signing_key
        self.request_topic = request_topic
        self.erasures_topic = erasures_topic
        self.reply_topic = reply_topic
        self.reply_partitions = reply_partitions
        self.reply_partition = reply_partition
        self.timeout_s = timeout_s
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._reader: asyncio.Task[None] | None = None
        self.hedge_after_s = hedge_after_s
        self.query_group = query_group
        self.on_outcome = on_outcome
        self.stats = ClientStats()
        self._owners: GroupOwners | None = None
        self._query_partitions = 0
        self._waiting: dict[bytes, asyncio.Future[tuple[bytes, bytes | None]]] = {}
        self._closed = False
        self._hedge_tokens = HEDGE_BURST
        self._answered: OrderedDict[bytes, None] = OrderedDict()

    async def __aenter__(self) -> MemoryClient:
        await self.start()
        return self

    async def __aexit__(self, t: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def _ensure_reply_topic(self, timeout_s: float = 30.0) -> int:
        """Create the reply topic when missing; wait until every partition has a leader."""
        admin = AIOKafkaAdminClient(bootstrap_servers=self.servers, **self._options)
        await admin.start()
        try:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            created = False
            while True:
                described = await admin.describe_topics([self.reply_topic])
                parts = [p for t in described if not t.get("error_code")
                         for p in t.get("partitions", [])]
                if parts and all(p.get("leader", -1) >= 0 for p in parts):
                    return len(parts)
                if not parts and not created:
                    with contextlib.suppress(TopicAlreadyExistsError):
                        await admin.create_topics(
                            [NewTopic(self.reply_topic, self.reply_partitions, 1)])
                    created = True
                if loop.time() > deadline:
                    raise TimeoutError(f"reply topic {self.reply_topic!r} has no leader yet")
                await asyncio.sleep(0.2)
        finally:
            await admin.close()

    async def start(self) -> None:
        count = await self._ensure_reply_topic()
        if self.reply_partition is None:
            self.reply_partition = random.randrange(count)
        self._producer = AIOKafkaProducer(bootstrap_servers=self.servers, linger_ms=0, acks=1,
                                          **self._options)
        self._consumer = AIOKafkaConsumer(bootstrap_servers=self.servers, enable_auto_commit=False,
                                          fetch_max_wait_ms=100, **self._options)
        await self._producer.start()
        await self._consumer.start()
        tp = TopicPartition(self.reply_topic, self.reply_partition)
        self._consumer.assign([tp])
        await self._consumer.seek_to_end(tp)
        await self._consumer.position(tp)  # resolve now: no reply sent later is skipped
        self._reader = asyncio.get_running_loop().create_task(self._read_replies())
        if self.hedge_after_s is not None:
            self._query_partitions = len(
                await self._producer.partitions_for(self.request_topic) or ())
            if self.query_group is not None:
                self._owners = GroupOwners(self.servers, self._options, self.query_group,
                                           self.request_topic)
                await self._owners.start()

    async def close(self) -> None:
        """Stop; a query still waiting raises :class:`ClientClosedError` (and is reported to
        ``on_outcome`` as not answered)."""
        self._closed = True
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_exception(ClientClosedError("the client was closed before the reply"))
        if self._owners is not None:
            await self._owners.close()
        if self._consumer is not None:
            await self._consumer.stop()
        if self._producer is not None:
            await self._producer.stop()

    async def _read_replies(self) -> None:
        assert self._consumer is not None
        while True:
            batches = await self._consumer.getmany(timeout_ms=200)
            for records in batches.values():
                for r in records:
                    cid = header(r.headers, CORRELATION_ID)
                    if cid is None:
                        continue
                    fut = self._waiting.pop(cid, None)
                    if fut is not None and not fut.done():
                        fut.set_result((r.value or b"", header(r.headers, ANSWERED_PARTITION)))
                        self._answered[cid] = None
                        if len(self._answered) > REMEMBERED_REPLIES:
                            self._answered.popitem(last=False)
                    elif cid in self._answered:
                        self.stats.duplicates_dropped += 1

    async def send_raw(self, value: bytes, *, key: bytes | None = None,
                       headers: list[tuple[str, bytes]] | None = None,
                       timeout_s: float | None = None,
                       correlation_id: bytes | None = None) -> MemoryReply:
        """Send any request bytes (the reply headers are added) and await the reply,
        hedged as the client is configured. With ``signing_key`` the request is signed,
        unless ``headers`` carry a signature or timestamp of their own (sent as given:
        a caller signing itself passes the ``correlation_id`` it signed, a fresh one
        for each request; none: a random one)."""
        answer = await self._ask(self.request_topic, value, key=key, headers=headers,
                                 timeout_s=timeout_s or self.timeout_s, hedged=True,
                                 correlation_id=correlation_id)
        return MemoryReply.model_validate_json(answer)

    async def _ask(self, topic: str, value: bytes, *, key: bytes | None,
                   headers: list[tuple[str, bytes]] | None, timeout_s: float,
                   hedged: bool = False, correlation_id: bytes | None = None) -> bytes:
        """Send a request to ``topic`` with the reply headers; the reply's bytes.
        ``hedged``: a copy goes to another member's partition after ``hedge_after_s``.
        With ``signing_key``, and no signature headers among ``headers``, the request is
        signed: its correlation id (``correlation_id``, or a random one) and reply
        partition are known only here."""
        if self._closed:
            raise ClientClosedError("the client is closed")
        if self._producer is None or self.reply_partition is None:
            raise RuntimeError("client not started")
        loop = asyncio.get_running_loop()
        started = loop.time()
        cid = correlation_id if correlation_id is not None else uuid.uuid4().bytes
        fut: asyncio.Future[tuple[bytes, bytes | None]] = loop.create_future()
        self._waiting[cid] = fut
        # the caller's trace, when it asks inside a span: the worker's spans continue it
        all_headers = tracing.with_context(
            request_headers(self.reply_topic, cid, self.reply_partition) + (headers or []))
        sent_ms = int(time.time() * 1000)  # both copies: the worker's deadline is the caller's
        if self.signing_key is not None and not any(
                name in (SIGNED_AT, SIGNATURE) for name, _ in headers or ()):
            all_headers += signed_headers(self.signing_key, sent_ms // 1000, self.reply_topic,
                                          self.reply_partition, cid, value)
        copy_to: int | None = None
        went_to: int | None = None
        if hedged:
            self.stats.queries += 1
            self._hedge_tokens = min(HEDGE_BURST, self._hedge_tokens + HEDGE_SHARE)
        try:
            first = await self._producer.send_and_wait(topic, value, key=key, headers=all_headers,
                                                       timestamp_ms=sent_ms)
            went_to = first.partition
            if hedged and self.hedge_after_s is not None and self.hedge_after_s < timeout_s:
                done, _ = await asyncio.wait({fut}, timeout=self.hedge_after_s)
                if not done and self._hedge_tokens < 1.0:
                    self.stats.hedges_withheld += 1
                elif not done:
                    copy_to = hedge_partition(
                        first.partition, self._owners.owners if self._owners else None,
                        self._query_partitions, random.choice)
                if copy_to is not None:
                    await self._producer.send_and_wait(topic, value, key=key, partition=copy_to,
                                                       headers=all_headers, timestamp_ms=sent_ms)
                    self.stats.hedges_sent += 1
                    self._hedge_tokens -= 1.0
            left = timeout_s - (loop.time() - started)
            answer, answered_on = await asyncio.wait_for(fut, max(left, 0.0))
        except ClientClosedError:
            if hedged:
                self._tell(QueryOutcome(loop.time() - started, False, copy_to is not None, False,
                                        went_to))
            raise
        except TimeoutError as exc:
            if hedged:
                self.stats.timed_out += 1
                self._tell(QueryOutcome(loop.time() - started, False, copy_to is not None, False,
                                        went_to))
            raise QueryTimeoutError(f"no reply within {timeout_s:.1f}s") from exc
        finally:
            self._waiting.pop(cid, None)
        if hedged:
            won = copy_to is not None and answered_on == str(copy_to).encode()
            self.stats.answered += 1
            self.stats.hedges_won += won
            self._tell(QueryOutcome(loop.time() - started, True, copy_to is not None, won,
                                    went_to))
        return answer

    def _tell(self, outcome: QueryOutcome) -> None:
        if self.on_outcome is not None:
            self.on_outcome(outcome)

    async def query(
        self,
        *,
        tenant_id: str,
        user_id: str,
        agent_id: str,
        message: str,
        conversation_id: str | None = None,
        context: str | None = None,
        request_id: str | None = None,
        timeout_s: float | None = None,
        **options: Any,
    ) -> MemoryReply:
        """Ask for memory. ``options``: top_k, just_keyword_search, include_short_term,
        last_n, long_memory_token_budget, timeout_ms. A request still waiting in the
        topic ``timeout_ms`` (default 1 s) after it was sent is not answered: the
        worker takes the caller to have given up; pass the wait you mean."""
        request = MemoryQuery(
            request_id=request_id, tenant_id=tenant_id, user_id=user_id, agent_id=agent_id,
            conversation_id=conversation_id, message=message, context=context,
            options=QueryOptions(**options),
        )
        body = request.model_dump_json(exclude_none=True).encode()
        return await self.send_raw(body, key=f"{tenant_id}/{user_id}".encode(),
                                   timeout_s=timeout_s)

    async def erase(
        self,
        *,
        tenant_id: str,
        target: ErasureTarget,
        user_id: str | None = None,
        conversation_id: str | None = None,
        memory_id: str | None = None,
        provider: str | None = None,
        dry_run: bool = False,
        erasure_id: str | None = None,
        reference: str | None = None,
        timeout_s: float = ERASE_TIMEOUT_S,
    ) -> ErasureReceipt:
        """Erase a user, a conversation, one memory or a whole tenant (``target``);
        the receipt says what went from each store. Repeating a request with the same
        ``erasure_id`` changes nothing and returns the same counts."""
        request = ErasureRequest.model_validate({
            "erasure_id": erasure_id or f"py-{uuid.uuid4().hex}", "tenant_id": tenant_id,
            "target": target, "user_id": user_id, "conversation_id": conversation_id,
            "memory_id": memory_id, "provider": provider, "dry_run": dry_run,
            "reference": reference})
        body = request.model_dump_json(exclude_none=True).encode()
        answer = await self._ask(self.erasures_topic, body, key=request.key(), headers=None,
                                 timeout_s=timeout_s)
        return ErasureReceipt.model_validate_json(answer)
