"""Signed queries (``MEMSTREAM_QUERY__REQUIRE_SIGNATURE``): a request signed
with its tenant's key is answered; an unsigned, stale, wrongly signed or
re-addressed one gets an ``unauthorized`` error reply with nothing of the
tenant in it."""

from __future__ import annotations

import json
import time

from streams.client import MemoryClient
from streams.wire.signing import signed_headers
from tests.integration.conftest import Stack, chat_event
from tests.support.services import KAFKA_BOOTSTRAP
from tests.support.worker import eventually

KEYS = {"t1": "t1-signing-key-0123", "t2": "t2-signing-key-0123"}


def client(stack: Stack, key: str | None = None) -> MemoryClient:
    return MemoryClient(KAFKA_BOOTSTRAP, request_topic=stack.topics["queries"],
                        reply_topic=f"{stack.name}.replies", timeout_s=20, signing_key=key)


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

    refused = []
    async with client(stack) as unsigned:
        refused.append(await unsigned.query(**ask))
        body, topic = json.dumps(ask).encode(), unsigned.reply_topic
        now = int(time.time())
        for headers in (signed_headers(KEYS["t1"], now - 3600, topic, body),  # stale
                        signed_headers(KEYS["t2"], now, topic, body),  # t2's key
                        signed_headers(KEYS["t1"], now, topic, body + b" "),  # other body
                        signed_headers(KEYS["t1"], now, "other.replies", body)):  # other topic
            refused.append(await unsigned.send_raw(body, key=b"t1/u1", headers=headers))
    async with client(stack, KEYS["t2"]) as other:  # t2's own key, asking for t1
        refused.append(await other.query(**ask))
    reasons = []
    for reply in refused:
        assert reply.error is not None and reply.error.code == "unauthorized", reply
        assert reply.short_term is None and not reply.memories and not reply.user_profile
        assert "private" not in reply.model_dump_json() and reply.tenant_id is None
        reasons.append(reply.error.message)
    assert [("not signed" in r, "from now" in r, "does not match" in r) for r in reasons] == [
        (True, False, False), (False, True, False), (False, False, True),
        (False, False, True), (False, False, True), (False, False, True)]


async def _equals(got: object, want: list[str]) -> bool:
    return await got == want  # type: ignore[misc]
