"""Signed queries (``MEMSTREAM_QUERY__REQUIRE_SIGNATURE``): a request signed
with its tenant's key is answered; an unsigned, stale, wrongly signed, v1-signed
or re-addressed one — another reply topic or partition, another correlation id —
gets an ``unauthorized`` error reply with nothing of the tenant in it."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid

from streams.client import MemoryClient
from streams.wire.headers import SIGNATURE, SIGNED_AT, header
from streams.wire.query import MemoryReply
from streams.wire.signing import signed_headers
from streams.wire.spring_reply import REPLY_TOPIC
from tests.integration.conftest import Stack, chat_event
from tests.support.services import KAFKA_BOOTSTRAP
from tests.support.worker import eventually

KEYS = {"t1": "t1-signing-key-0123", "t2": "t2-signing-key-0123"}


def client(stack: Stack, key: str | None = None,
           reply_partition: int | None = None) -> MemoryClient:
    return MemoryClient(KAFKA_BOOTSTRAP, request_topic=stack.topics["queries"],
                        reply_topic=f"{stack.name}.replies", timeout_s=20, signing_key=key,
                        reply_partition=reply_partition)


async def test_only_queries_signed_with_the_tenants_key_are_answered(stack: Stack) -> None:
    stack.worker(MEMSTREAM_QUERY__REQUIRE_SIGNATURE="true",
                 MEMSTREAM_QUERY__TENANT_KEYS=json.dumps(KEYS)).start()
    await stack.produce([chat_event(i, "c1", content=f"private {i}") for i in range(2)])
    ask = {"tenant_id": "t1", "user_id": "u1", "agent_id": "a1", "message": "what did I say",
           "conversation_id": "c1"}

    async with client(stack, KEYS["t1"]) as signed:
        async def window() -> list[str]:
            reply = await signed.query(**ask)
            assert reply.error is None, reply.error
            return [m["content"] for m in (reply.short_term or {}).get("messages", [])]

        await eventually(lambda: _equals(window(), ["private 0", "private 1"]), 60,
                         "the signed query answered")
        partition = signed.reply_partition
        assert partition is not None
    # a signed request as it went over the wire (answered above)
    captured = next(r for r in await stack.read_topic(stack.topics["queries"])
                    if header(r.headers, SIGNATURE) is not None
                    and header(r.headers, REPLY_TOPIC) == signed.reply_topic.encode())

    refused = []
    # the same reply topic and partition as the signed client: only what is named changes
    async with client(stack, reply_partition=partition) as unsigned:
        refused.append(await unsigned.query(**ask))
        body, topic = json.dumps(ask).encode(), unsigned.reply_topic
        now = int(time.time())

        async def own(key: str, ts: int, to: str, part: int | None,
                      signed_body: bytes) -> MemoryReply:
            cid = uuid.uuid4().bytes
            return await unsigned.send_raw(
                body, key=b"t1/u1", correlation_id=cid,
                headers=signed_headers(key, ts, to, part, cid, signed_body))

        answered = await own(KEYS["t1"], now, topic, partition, body)  # signed by the caller
        assert answered.error is None and answered.tenant_id == "t1", answered
        refused.append(await own(KEYS["t1"], now - 3600, topic, partition, body))  # stale
        refused.append(await own(KEYS["t2"], now, topic, partition, body))  # t2's key
        refused.append(await own(KEYS["t1"], now, topic, partition, body + b" "))  # other body
        refused.append(await own(KEYS["t1"], now, "other.replies", partition, body))  # other topic
        refused.append(await own(KEYS["t1"], now, topic, partition + 1, body))  # other partition
        refused.append(await own(KEYS["t1"], now, topic, None, body))  # no partition signed
        # the captured request's signature, re-sent with another correlation id
        refused.append(await unsigned.send_raw(
            captured.value, key=captured.key, correlation_id=uuid.uuid4().bytes,
            headers=[(k, v) for k, v in captured.headers if k in (SIGNED_AT, SIGNATURE)]))
        v1 = hmac.new(KEYS["t1"].encode(), f"{now}.{topic}.".encode() + body, hashlib.sha256)
        refused.append(await unsigned.send_raw(body, key=b"t1/u1", headers=[
            (SIGNED_AT, str(now).encode()), (SIGNATURE, b"v1=" + v1.hexdigest().encode())]))
    async with client(stack, KEYS["t2"]) as other:  # t2's own key, asking for t1
        refused.append(await other.query(**ask))
    reasons = []
    for reply in refused:
        assert reply.error is not None and reply.error.code == "unauthorized", reply
        assert reply.short_term is None and not reply.memories and not reply.user_profile
        assert "private" not in reply.model_dump_json() and reply.tenant_id is None
        reasons.append(reply.error.message)
    mismatch = (False, False, True, False)
    assert [("not signed" in r, "from now" in r, "does not match" in r, "v1 signatures" in r)
            for r in reasons] == [
        (True, False, False, False), (False, True, False, False), mismatch, mismatch, mismatch,
        mismatch, mismatch, mismatch, (False, False, False, True), mismatch]


async def _equals(got: object, want: list[str]) -> bool:
    return await got == want  # type: ignore[misc]
