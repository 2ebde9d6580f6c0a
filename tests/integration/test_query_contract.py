"""The request/reply contract against a real worker: every request answered,
Spring headers echoed, long-term rules, tenants, keyword-only retrieval."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
import pytest_asyncio
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from streams.client import MemoryClient
from streams.memory.model import MemoryCandidate, agent_cube
from streams.memory.provider import Scope
from streams.memory.providers.builtin.provider import BuiltinProvider
from streams.wire.headers import header
from tests.fakes.memos import FakeMemOS
from tests.fakes.openai import FakeOpenAI
from tests.integration.conftest import Stack, chat_event
from tests.support.services import KAFKA_BOOTSTRAP
from tests.support.worker import ROOT, eventually

pytestmark = pytest.mark.asyncio(loop_scope="module")
T0 = datetime(2026, 3, 1, 9, tzinfo=UTC)


def fact(
    text: str, *, scope: str = "user", day: int = 1, src: str | None = None
) -> MemoryCandidate:
    return MemoryCandidate(content=text, type="text", scope=scope,  # type: ignore[arg-type]
                           importance=0.6, event_time=T0.replace(day=day),
                           source_event_ids=(src or f"src-{uuid.uuid4().hex[:6]}",))


def cli(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streams.cli", *args],
                          env={**os.environ, **stack.env()}, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def running(shared_stack: Stack) -> AsyncIterator[tuple[Stack, FakeMemOS, FakeOpenAI]]:
    s = shared_stack
    with FakeMemOS() as memos, FakeOpenAI() as embed:
        s.extra_env.update({
            "MEMSTREAM_MEMOS__BASE_URL": memos.url,
            "MEMSTREAM_EMBEDDING__KIND": "openai",
            "MEMSTREAM_EMBEDDING__BASE_URL": f"{embed.url}/v1",
            "MEMSTREAM_EMBEDDING__MODEL": "fake-embed",
            "MEMSTREAM_EMBEDDING__DIM": "64",
            "MEMSTREAM_CONSOLIDATION__PROVIDER_ATTEMPTS": "1",
        })
        worker = s.worker().start()
        worker.wait_for_log("query partitions assigned")  # none of the requests is a backlog
        # seed long-term memories straight into the built-in provider
        engine = s.engine()
        try:
            import httpx

            from streams.adapters.http.openai_compat import OpenAIEmbedder

            async with httpx.AsyncClient() as http:
                provider = BuiltinProvider(engine, embedder=OpenAIEmbedder(
                    http, f"{embed.url}/v1", "fake-embed", dim=64))
                alice = Scope("tenant-a", "alice", "planner")
                await provider.add(alice, "user_profile", [
                    fact("Alice is vegetarian and never eats fish.", day=1),
                    fact("Alice lives in Lisbon near the river.", day=2),
                    fact("Alice's sister Ana is allergic to peanuts.", day=3),
                ])
                await provider.add(alice, agent_cube("planner"), [
                    fact("Book trains for Alice two weeks ahead; she prefers window seats.",
                         scope="agent", day=4),
                ])
                old = await provider.add(
                    alice, "user_profile", [fact("Alice works at a bakery.", day=1)]
                )
                new = await provider.add(
                    alice, "user_profile", [fact("Alice works at a library.", day=5)]
                )
                await provider.expire(alice, "user_profile", old.ids, new.ids[0])
                bob = Scope("tenant-b", "alice", "planner")  # same ids, another tenant
                await provider.add(bob, "user_profile", [fact("Tenant B's Alice plays the cello.")])
        finally:
            await engine.dispose()
        await s.produce([chat_event(i, "trip", tenant="tenant-a", user_id="alice",
                                    agent_id="planner", content=f"trip message {i}")
                         for i in range(4)])
        await eventually(lambda: s.sql("SELECT COUNT(*) FROM conversation_message")[0][0] == "4",
                         60, "chat stored")
        yield s, memos, embed
        worker.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(running: tuple[Stack, Any, Any]) -> AsyncIterator[MemoryClient]:
    s = running[0]
    async with MemoryClient(KAFKA_BOOTSTRAP, request_topic=s.topics["queries"],
                            reply_topic=f"{s.name}.replies", timeout_s=20) as c:
        yield c


async def ask(client: MemoryClient, message: str, **kw: Any) -> Any:
    args: dict[str, Any] = {"tenant_id": "tenant-a", "user_id": "alice", "agent_id": "planner"}
    args.update(kw)
    return await client.query(message=message, **args)


async def test_reply_carries_long_and_short_term(client: MemoryClient) -> None:
    r = await ask(client, "what does she eat?", conversation_id="trip")
    assert r.error is None and r.warnings == []
    assert "vegetarian" in r.user_profile
    assert "[2026-03-01]" in r.user_profile  # every line carries its event date
    assert "window seats" in r.agent_memory
    assert r.memories and r.memories[0].cube in {"user_profile", "agent_planner"}
    assert all(m.score >= 0.3 for m in r.memories)
    assert r.short_term is not None
    assert [m["content"] for m in r.short_term["messages"]][-1] == "trip message 3"
    assert r.latency_ms > 0 and r.budget is not None and r.budget.tokens_used > 0


async def test_another_user_does_not_get_the_conversation_s_window(client: MemoryClient) -> None:
    r = await ask(client, "what does she eat?", conversation_id="trip", user_id="mallory")
    assert r.short_term is None
    assert [w.code for w in r.warnings] == ["short_term_withheld"]
    same_but_cased = await ask(client, "hi", conversation_id="trip", user_id="Alice")
    assert same_but_cased.short_term is None


async def test_superseded_memories_are_never_returned(client: MemoryClient) -> None:
    r = await ask(client, "where does Alice work?", top_k=20)
    texts = [m.content for m in r.memories] + [r.user_profile]
    assert any("library" in t for t in texts)
    assert not any("bakery" in t for t in texts)


async def test_tenant_b_never_sees_tenant_a(client: MemoryClient) -> None:
    r = await ask(client, "vegetarian fish cello lisbon", tenant_id="tenant-b", top_k=20)
    contents = " ".join(m.content for m in r.memories) + r.user_profile
    assert "cello" in contents
    assert "vegetarian" not in contents and "Lisbon" not in contents


async def test_keyword_only_changes_the_retrieval(client: MemoryClient) -> None:
    # "she" is a stopword to BM25, but the (bag-of-words) embedding still sees it;
    # "zebra" is in no memory (and makes the query name something to look for)
    hybrid = await ask(client, "she zebra", top_k=5)
    lexical = await ask(client, "she zebra", top_k=5, just_keyword_search=True)
    assert lexical.long_term.keyword_only and not hybrid.long_term.keyword_only
    assert lexical.memories == []
    assert [m.content for m in hybrid.memories if m.cube == "agent_planner"] == [
        "Book trains for Alice two weeks ahead; she prefers window seats."]


async def test_a_query_naming_nothing_gets_the_strongest_memories(client: MemoryClient) -> None:
    reply = await ask(client, "What do you know about me?", top_k=10)
    assert reply.long_term.ranked_by == "strength"
    user = [m.content for m in reply.memories if m.cube == "user_profile"]
    assert user[0] == "Alice works at a library."  # the newest of equally important facts
    assert "Alice works at a bakery." not in user  # superseded
    assert "Alice is vegetarian and never eats fish." in reply.user_profile
    assert reply.agent_memory.endswith("she prefers window seats.")


async def test_long_memory_off_means_no_long_term_part(running: Any, client: MemoryClient) -> None:
    stack = running[0]
    out = cli(stack, "agent-config", "set", "--tenant", "tenant-a", "--agent", "quiet",
              "--provider", "MYSQL", "--open-long-memory", "off")
    assert out.returncode == 0, out.stderr

    async def skipped() -> bool:
        r = await ask(client, "what does she eat?", agent_id="quiet")
        return r.long_term.skipped is not None
    await eventually(skipped, 30, "the worker to see the configuration")
    r = await ask(client, "what does she eat?", agent_id="quiet", conversation_id="trip")
    assert r.user_profile == "" and r.agent_memory == "" and r.memories == []
    assert r.error is None and r.short_term is not None


async def test_provider_failure_still_returns_short_term(
    running: Any, client: MemoryClient
) -> None:
    stack, memos, _ = running
    out = cli(stack, "agent-config", "set", "--tenant", "tenant-a", "--agent", "memos-agent",
              "--provider", "MEMOS", "--open-long-memory", "on", "--model", "gpt-x")
    assert out.returncode == 0, out.stderr
    memos.fail_always(status=503)
    try:
        async def routed() -> bool:
            r = await ask(client, "anything", agent_id="memos-agent", conversation_id="trip")
            return r.long_term.provider == "memos" or any(
                w.code == "long_term_failed" for w in r.warnings)
        await eventually(routed, 30, "the worker to route the agent to MemOS")
        r = await ask(client, "anything", agent_id="memos-agent", conversation_id="trip")
        assert [w.code for w in r.warnings] == ["long_term_failed"]
        assert r.memories == [] and r.user_profile == ""
        assert r.short_term is not None and len(r.short_term["messages"]) > 0
        assert r.error is None
    finally:
        memos.recover()


async def raw_request(topic: str, value: bytes, headers: list[tuple[str, bytes]]) -> None:
    p = AIOKafkaProducer(bootstrap_servers=KAFKA_BOOTSTRAP)
    await p.start()
    try:
        await p.send_and_wait(topic, value, key=b"tenant-a/alice", headers=headers)
    finally:
        await p.stop()


async def read_reply(topic: str, partition: int, correlation: bytes, timeout: float = 20) -> Any:
    c = AIOKafkaConsumer(bootstrap_servers=KAFKA_BOOTSTRAP, enable_auto_commit=False)
    await c.start()
    try:
        tp = TopicPartition(topic, partition)
        c.assign([tp])
        await c.seek_to_beginning(tp)
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            for msgs in (await c.getmany(timeout_ms=500)).values():
                for m in msgs:
                    if header(m.headers, "kafka_correlationId") == correlation:
                        return m
        raise TimeoutError("no reply")
    finally:
        await c.stop()


async def test_spring_headers_are_echoed_byte_for_byte(running: Any, client: MemoryClient) -> None:
    stack = running[0]
    reply_topic = f"{stack.name}.spring-replies"
    await stack.produce([b"warm-up"], topic=reply_topic)  # creates the topic (1 partition)
    correlation = b"\x00\xffspring-\x80" + uuid.uuid4().bytes  # opaque, not UTF-8
    body = json.dumps({"tenant_id": "tenant-a", "user_id": "alice", "agent_id": "planner",
                       "message": "what does she eat?"}).encode()
    await raw_request(stack.topics["queries"], body, [
        ("kafka_replyTopic", reply_topic.encode()),
        ("kafka_correlationId", correlation),
        ("kafka_replyPartition", (0).to_bytes(4, "big")),
    ])
    m = await read_reply(reply_topic, 0, correlation)
    assert header(m.headers, "kafka_correlationId") == correlation
    doc = json.loads(m.value)
    assert doc["error"] is None and "vegetarian" in doc["user_profile"]


async def test_a_reply_without_a_reply_partition_reaches_every_replica(running: Any) -> None:
    """Spring replicas whose reply containers share one group each own some
    partitions of the reply topic: a reply with no ``kafka_replyPartition``
    goes to every partition, so the one that asked gets it."""
    stack = running[0]
    reply_topic = f"{stack.name}.shared-replies"
    admin = AIOKafkaAdminClient(bootstrap_servers=KAFKA_BOOTSTRAP)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(reply_topic, 3, 1)])
    finally:
        await admin.close()
    correlation = uuid.uuid4().bytes
    body = json.dumps({"tenant_id": "tenant-a", "user_id": "alice", "agent_id": "planner",
                       "message": "what does she eat?", "options": None}).encode()
    await raw_request(stack.topics["queries"], body, [
        ("kafka_replyTopic", reply_topic.encode()), ("kafka_correlationId", correlation)])
    copies = [await read_reply(reply_topic, p, correlation) for p in range(3)]
    for m in copies:
        assert header(m.headers, "contentType") == b"application/json"
        assert json.loads(m.value)["error"] is None
    assert len({m.value for m in copies}) == 1


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"{not json", "not a JSON object"),
        (b"[1, 2, 3]", "not a JSON object"),
        (json.dumps({"user_id": "alice", "agent_id": "planner", "message": "hi"}).encode(),
         "tenant_id"),
        (json.dumps({"tenant_id": "tenant-a", "user_id": "alice", "agent_id": "planner",
                     "message": "hi", "options": {"top_k": 0}}).encode(), "top_k"),
        (json.dumps({"tenant_id": "tenant-a", "user_id": "alice", "agent_id": "planner",
                     "message": ""}).encode(), "message"),
    ],
)
async def test_malformed_requests_get_an_error_reply(client: MemoryClient, body: bytes,
                                                      fragment: str) -> None:
    r = await client.send_raw(body, key=b"x")
    assert r.error is not None and r.error.code == "bad_request"
    assert fragment in r.error.message


async def test_a_request_without_reply_topic_is_dead_lettered(running: Any) -> None:
    stack = running[0]
    marker = uuid.uuid4().hex.encode()
    await raw_request(stack.topics["queries"], b'{"marker": "' + marker + b'"}', [])

    async def dead() -> bool:
        msgs = await stack.read_topic(stack.topics["dlq"], timeout=5)
        return any(marker in (m.value or b"") and header(m.headers, "memstream.error.reason")
                   == b"no_reply_topic" for m in msgs)
    await eventually(dead, 30, "the dead letter")


async def test_query_command_line(running: Any) -> None:
    stack = running[0]
    out = cli(stack, "query", "--tenant", "tenant-a", "--user", "alice", "--agent", "planner",
              "--conversation", "trip", "what does she eat?")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert "vegetarian" in doc["user_profile"] and doc["short_term"]["messages"]


async def test_searches_are_logged_for_the_search_trends(running: Any) -> None:
    stack = running[0]

    def logged() -> bool:
        rows = stack.sql("SELECT provider, keyword_only, outcome FROM memory_search_log "
                         "WHERE tenant_id = 'tenant-a'")
        return any(r[0] == "mysql" and r[1] == "1" and r[2] == "ok" for r in rows) and any(
            r[0] == "memos" and r[2] != "ok" for r in rows)
    await eventually(logged, 20, "the search log to be flushed")
