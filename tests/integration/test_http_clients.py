"""The HTTP clients against their fakes over real loopback HTTP: documented
request shapes, mapping of answers, retries, permanent errors, tenant isolation."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import httpx
import pytest
from prometheus_client import REGISTRY

from streams.adapters.http.client import RetryPolicy, send_json, with_retries
from streams.adapters.http.openai_compat import ChatModel, OpenAIEmbedder
from streams.memory.model import MemoryCandidate, readable_cubes
from streams.memory.provider import (
    EmptyModelAnswer,
    ModelCaller,
    PermanentProviderError,
    ProviderBadAnswer,
    RetryableProviderError,
    Scope,
    SearchRequest,
)
from streams.memory.providers.mem0 import Mem0Provider, mem0_entity
from streams.memory.providers.memos import MemOSProvider, memos_ids
from tests.fakes.mem0 import FakeMem0
from tests.fakes.memos import FakeMemOS
from tests.fakes.openai import NO_CHOICES, FakeOpenAI, embed_text
from tests.fakes.server import FakeControl
from tests.support.services import free_port

pytestmark = pytest.mark.alone  # 0.3 s client timeouts against servers in its own threads

FAST = RetryPolicy(attempts=3, initial_s=0.01, max_s=0.05, jitter=False)
A = Scope("tenant-a", "u1", "a1")
B = Scope("tenant-b", "u1", "a1")
T0 = datetime(2024, 5, 1, 9, 30, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]


def fact(text: str, **kw: object) -> MemoryCandidate:
    return MemoryCandidate(text, **kw)  # type: ignore[arg-type]


def ask(query: str, **kw: object) -> SearchRequest:
    return SearchRequest(query, readable_cubes("a1"), **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def memos_srv() -> Iterator[FakeMemOS]:
    with FakeMemOS(api_key="k-memos") as srv:
        yield srv


@pytest.fixture(scope="module")
def mem0_srv() -> Iterator[FakeMem0]:
    with FakeMem0(api_key="k-mem0") as srv:
        yield srv


@pytest.fixture(scope="module")
def oai_srv() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(dim=16, api_key="k-oai") as srv:
        yield srv


@pytest.fixture(autouse=True)
def _clean(memos_srv: FakeMemOS, mem0_srv: FakeMem0, oai_srv: FakeOpenAI) -> None:
    for srv in (memos_srv, mem0_srv, oai_srv):
        srv.reset()
    oai_srv.handler, oai_srv.reverse_embeddings = None, False


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as c:
        yield c


@pytest.fixture
def memos(client: httpx.AsyncClient, memos_srv: FakeMemOS) -> MemOSProvider:
    return MemOSProvider(client, memos_srv.url, api_key="k-memos", timeout_s=0.3, retry=FAST)


@pytest.fixture
def mem0(client: httpx.AsyncClient, mem0_srv: FakeMem0) -> Mem0Provider:
    return Mem0Provider(client, mem0_srv.url, api_key="k-mem0", timeout_s=0.3, retry=FAST)


WHO = ModelCaller("tenant-a", "agent-a")


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


# ------------------------------------------------------------------ MemOS
async def test_memos_add_sends_the_documented_body(memos: MemOSProvider,
                                                   memos_srv: FakeMemOS) -> None:
    result = await memos.add(A, "user_profile", [
        fact("Likes green tea", type="preference", importance=0.8, source_event_ids=("e1", "e2"),
             event_time=T0)])
    assert memos_srv.bodies("/product/add") == [{
        "user_id": "tenant-a:u1", "writable_cube_ids": ["tenant-a:u1:user_profile"],
        "messages": [{"type": "text", "text": "Likes green tea"}],
        "async_mode": "sync", "mode": "fast",
        "custom_tags": ["memstream", "type:preference", "scope:user"],
        "info": {"tenant_id": "tenant-a", "cube": "user_profile", "memstream_type": "preference",
                 "scope": "user", "importance": 0.8, "kind": "fact",
                 "source_event_ids": ["e1", "e2"], "event_time": "2024-05-01T09:30:00+00:00"},
    }]
    assert memos_srv.requests("/product/add")[0].headers["Authorization"] == "Token k-memos"
    [stored] = memos_srv.memories("tenant-a:u1:user_profile")
    assert result.ids == [stored["id"]]


async def test_memos_search_sends_every_field_and_maps_all_buckets(
        memos: MemOSProvider, memos_srv: FakeMemOS) -> None:
    ids = (await memos.add(A, "user_profile", [fact("Drinks green tea daily", event_time=T0)])).ids
    await memos.add(A, "agent_a1", [fact("Green tea orders go to the tea shop", scope="agent")])
    memos_srv.seed("tenant-a:u1:user_profile", "Prefers green tea without sugar",
                   created_at="2023-01-02T03:04:05.123456789+00:00")
    memos_srv.seed("tenant-a:agent_a1", "tea_lookup tool finds green tea",
                   memory_type="ToolTrajectoryMemory")
    found = await memos.search(A, ask("green tea", relativity=0.2, top_k=5, pref_top_k=3))
    reads = memos_srv.bodies("/product/search")  # each add read back, then the search
    assert [b["query"] for b in reads[:2]] == ["Drinks green tea daily",
                                               "Green tea orders go to the tea shop"]
    assert reads[2:] == [{
        "query": "green tea", "user_id": "tenant-a:u1",
        "readable_cube_ids": ["tenant-a:u1:user_profile", "tenant-a:agent_a1"],
        "mode": "fast", "top_k": 5, "relativity": 0.0, "dedup": "no",
        "include_preference": True, "pref_top_k": 3,
    }]
    by_text = {m.content: m for m in found}
    assert by_text["Drinks green tea daily"].id == ids[0]
    assert by_text["Drinks green tea daily"].event_time == T0
    assert by_text["Prefers green tea without sugar"].type == "preference"
    assert by_text["Prefers green tea without sugar"].event_time == datetime(
        2023, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    assert by_text["tea_lookup tool finds green tea"].type == "tool"
    assert by_text["Green tea orders go to the tea shop"].cube == "agent_a1"
    assert by_text["Green tea orders go to the tea shop"].scope == "agent"
    assert [m.score for m in found] == sorted((m.score for m in found), reverse=True)
    assert all(0 < m.score <= 1 for m in found)


async def test_memos_expire_deletes_with_cube_and_ids_only(memos: MemOSProvider,
                                                           memos_srv: FakeMemOS) -> None:
    ids = (await memos.add(A, "user_profile", [fact("Lives in Lyon"), fact("Works at Acme")])).ids
    await memos.expire(A, "user_profile", ids[:1], superseded_by=ids[1])
    assert memos_srv.bodies("/product/delete_memory") == [
        {"writable_cube_ids": ["tenant-a:u1:user_profile"], "memory_ids": ids[:1]}]
    assert [m["memory"] for m in memos_srv.memories()] == ["Works at Acme"]
    assert [m.content for m in await memos.search(A, ask("Lyon", relativity=0.0))] == [
        "Works at Acme"]


async def test_memos_keyword_only_forces_fast_mode_and_keyword_match(
        client: httpx.AsyncClient, memos_srv: FakeMemOS) -> None:
    fine = MemOSProvider(client, memos_srv.url, api_key="k-memos", retry=FAST, mode="fine")
    await fine.add(A, "user_profile", [fact("green tea is the best"), fact("what is the plan")])
    everything = await fine.search(A, ask("what is the best tea", relativity=0.0))
    keyword = await fine.search(A, ask("what is the best tea", relativity=0.0, keyword_only=True))
    assert [b["mode"] for b in memos_srv.bodies("/product/search")[-2:]] == ["fine", "fast"]
    assert {m.content for m in everything} == {"green tea is the best", "what is the plan"}
    assert [m.content for m in keyword] == ["green tea is the best"]


async def test_memos_tenants_never_see_each_other(memos: MemOSProvider,
                                                  memos_srv: FakeMemOS) -> None:
    await memos.add(A, "user_profile", [fact("Tenant A secret: blue door")])
    await memos.add(A, "agent_a1", [fact("Tenant A agent note: blue door")])
    assert await memos.search(B, ask("blue door", relativity=0.0)) == []
    assert len(await memos.search(A, ask("blue door", relativity=0.0))) == 2
    assert memos_ids(Scope("a:b", "c", "x"), "user_profile") != memos_ids(
        Scope("a", "b:c", "x"), "user_profile")
    assert memos_ids(A, "agent_a1").cube_id == "tenant-a:agent_a1"
    # a server answering with a cube this request may not read: dropped
    foreign = {"cube_id": "tenant-b:u1:user_profile", "memories": [
        {"id": "x", "memory": "blue door", "metadata": {"relativity": 0.9}}]}
    memos_srv.fail_next(1, 200, path="/product/search",
                        body={"code": 200, "message": "ok", "data": {"text_mem": [foreign]}})
    assert await memos.search(A, ask("blue door")) == []


@pytest.mark.parametrize("fault", ["429", "500", "code-50004", "code-429", "timeout"])
async def test_memos_retries_transient_failures_then_succeeds(
        memos: MemOSProvider, memos_srv: FakeMemOS, fault: str) -> None:
    path = "/product/add"
    if fault == "429":
        memos_srv.rate_limit_next(2, path=path)
    elif fault == "500":
        memos_srv.fail_next(2, 500, path=path)
    elif fault.startswith("code-"):
        memos_srv.fail_code_next(2, int(fault[5:]), path=path)
    else:
        memos_srv.delay_next(2, 1.0, path=path, process=False)
    before = metric("memstream_provider_requests_total", provider="memos", operation="add")
    result = await memos.add(A, "user_profile", [fact("Plays chess")])
    assert memos_srv.count(path) == 3
    assert [m["id"] for m in memos_srv.memories()] == result.ids
    after = metric("memstream_provider_requests_total", provider="memos", operation="add")
    assert after - before == 3


async def test_memos_gives_up_after_the_policy_attempts(memos: MemOSProvider,
                                                        memos_srv: FakeMemOS) -> None:
    memos_srv.fail_always(503)
    before = metric("memstream_provider_failures_total", provider="memos", operation="search",
                    error="ProviderUnavailable")
    with pytest.raises(RetryableProviderError):
        await memos.search(A, ask("anything"))
    assert memos_srv.count("/product/search") == FAST.attempts
    assert metric("memstream_provider_failures_total", provider="memos", operation="search",
                  error="ProviderUnavailable") - before == FAST.attempts
    memos_srv.recover()
    assert await memos.search(A, ask("anything")) == []


@pytest.mark.parametrize("fault", ["http-400", "code-40000", "code-40002", "http-401"])
async def test_memos_permanent_errors_are_not_retried(memos: MemOSProvider,
                                                      memos_srv: FakeMemOS, fault: str) -> None:
    kind, value = fault.split("-")
    if kind == "http":
        memos_srv.fail_next(1, int(value))
    else:
        memos_srv.fail_code_next(1, int(value))
    with pytest.raises(PermanentProviderError):
        await memos.add(A, "user_profile", [fact("Speaks Italian")])
    assert memos_srv.count("/product/add") == 1


async def test_memos_fake_rejects_a_wrong_field_name(client: httpx.AsyncClient,
                                                     memos_srv: FakeMemOS) -> None:
    body = {"query": "tea", "userid": "tenant-a:u1", "readable_cube_ids": ["c"]}
    raw = await client.post(f"{memos_srv.url}/product/search", json=body,
                            headers={"Authorization": "Token k-memos"})
    assert raw.status_code == 422 and raw.json()["code"] == 422
    with pytest.raises(PermanentProviderError):
        await send_json(client, "POST", f"{memos_srv.url}/product/search", provider="memos",
                        operation="search", decode=lambda a: a, body=body, timeout_s=1)


async def test_memos_delete_failure_status(memos: MemOSProvider, memos_srv: FakeMemOS) -> None:
    failed = {"code": 200, "message": "Failed to delete memories", "data": {"status": "failure"}}
    memos_srv.fail_next(1, 200, body=failed)
    await memos.expire(A, "user_profile", ["m1"], None)  # retried, then succeeded
    assert memos_srv.count("/product/delete_memory") == 2
    bad_mode = dict(failed, message="Exactly one delete mode must be provided")
    memos_srv.fail_next(1, 200, body=bad_mode)
    with pytest.raises(PermanentProviderError):
        await memos.expire(A, "user_profile", ["m1"], None)


# ------------------------------------------------------------------- Mem0
async def test_mem0_add_search_expire_follow_the_documented_shapes(
        mem0: Mem0Provider, mem0_srv: FakeMem0) -> None:
    user_ids = (await mem0.add(A, "user_profile", [
        fact("Allergic to peanuts", importance=0.9, source_event_ids=("e7",), event_time=T0)])).ids
    agent_ids = (await mem0.add(A, "agent_a1", [
        fact("Peanut questions need a safety note", scope="agent", type="skill")])).ids
    meta = {"tenant_id": "tenant-a", "cube": "user_profile", "type": "text", "scope": "user",
            "importance": 0.9, "kind": "fact", "source_event_ids": ["e7"],
            "event_time": "2024-05-01T09:30:00+00:00"}
    adds = mem0_srv.bodies("/memories")
    assert adds[0] == {"messages": [{"role": "user", "content": "Allergic to peanuts"}],
                       "user_id": "tenant-a:u1", "metadata": meta, "infer": False}
    assert adds[1]["agent_id"] == "tenant-a:a1" and "user_id" not in adds[1]
    assert adds[1]["messages"][0]["role"] == "assistant" and adds[1]["infer"] is False
    assert mem0_srv.requests("/memories")[0].headers["X-API-Key"] == "k-mem0"

    found = await mem0.search(A, ask("peanuts safety", relativity=0.1, top_k=4))
    canonical = partial(json.dumps, sort_keys=True)
    assert sorted(map(canonical, mem0_srv.bodies("/search"))) == sorted(map(canonical, [
        {"query": "peanuts safety", "top_k": 4, "threshold": 0.0,
         "filters": {"user_id": "tenant-a:u1", "tenant_id": "tenant-a", "cube": "user_profile"}},
        {"query": "peanuts safety", "top_k": 4, "threshold": 0.0,
         "filters": {"agent_id": "tenant-a:a1", "tenant_id": "tenant-a", "cube": "agent_a1"}},
    ]))
    by_id = {m.id: m for m in found}
    assert by_id[user_ids[0]].event_time == T0 and by_id[user_ids[0]].importance == 0.9
    assert by_id[user_ids[0]].source_event_ids == ("e7",)
    assert by_id[agent_ids[0]].cube == "agent_a1" and by_id[agent_ids[0]].type == "skill"

    await mem0.expire(A, "user_profile", user_ids, superseded_by=None)
    await mem0.expire(A, "user_profile", user_ids, superseded_by=None)  # 404: already gone
    assert [r.path for r in mem0_srv.requests(method="DELETE")] == [
        f"/memories/{user_ids[0]}"] * 2
    assert [m["id"] for m in mem0_srv.memories()] == agent_ids


async def test_mem0_tenant_isolation_and_keyword_only(mem0: Mem0Provider,
                                                      mem0_srv: FakeMem0) -> None:
    await mem0.add(A, "user_profile", [fact("the plan is secret"), fact("red bicycle owner")])
    assert await mem0.search(B, ask("red bicycle plan", relativity=0.0)) == []
    assert mem0_entity(B, "agent_a1") == {"agent_id": "tenant-b:a1"}
    both = await mem0.search(A, ask("what is the plan for the red bicycle", relativity=0.0))
    assert len(both) == 2
    only = await mem0.search(A, ask("what is the bicycle", relativity=0.0, keyword_only=True))
    assert [m.content for m in only] == ["red bicycle owner"]
    foreign = {"id": "z", "memory": "red bicycle", "score": 0.9, "user_id": "tenant-a:u1",
               "metadata": {"tenant_id": "tenant-b", "cube": "user_profile"}}
    mem0_srv.fail_next(2, 200, path="/search", body={"results": [foreign]})
    assert await mem0.search(A, ask("red bicycle")) == []


@pytest.mark.parametrize("fault", ["429", "502", "500", "timeout"])
async def test_mem0_retries_transient_failures(mem0: Mem0Provider, mem0_srv: FakeMem0,
                                               fault: str) -> None:
    if fault == "timeout":
        mem0_srv.delay_next(2, 1.0, path="/memories", process=False)
    elif fault == "502":
        mem0_srv.upstream_error_next(2, "provider_rate_limited")
    else:
        mem0_srv.fail_next(2, int(fault), path="/memories")
    ids = (await mem0.add(A, "user_profile", [fact("Collects stamps")])).ids
    assert mem0_srv.count("/memories") == 3 and len(ids) == 1


async def test_mem0_permanent_and_exhausted_errors(mem0: Mem0Provider, mem0_srv: FakeMem0,
                                                   client: httpx.AsyncClient) -> None:
    mem0_srv.upstream_error_next(1, "provider_bad_request")
    with pytest.raises(PermanentProviderError):
        await mem0.add(A, "user_profile", [fact("x")])
    mem0_srv.fail_next(1, 400)
    with pytest.raises(PermanentProviderError):
        await mem0.search(A, ask("x"))
    assert mem0_srv.count() == 3  # one add, two cube searches started together
    mem0_srv.fail_always(503)
    with pytest.raises(RetryableProviderError):
        await mem0.add(A, "user_profile", [fact("x")])
    assert mem0_srv.count("/memories") == 1 + FAST.attempts
    mem0_srv.recover()
    headers = {"X-API-Key": "k-mem0"}
    no_entity = await client.post(f"{mem0_srv.url}/search", json={"query": "x"}, headers=headers)
    typo = await client.post(f"{mem0_srv.url}/search", json={"query": "x", "filter": {}},
                             headers=headers)
    assert (no_entity.status_code, typo.status_code) == (400, 422)



async def test_a_slow_server_still_writes_after_the_client_gave_up(mem0: Mem0Provider,
                                                                   mem0_srv: FakeMem0) -> None:
    mem0_srv.delay_next(1, 0.6, path="/memories")  # processed after the 0.3 s client timeout
    ids = (await mem0.add(A, "user_profile", [fact("Owns a cat")])).ids
    for _ in range(40):
        if len(mem0_srv.memories()) == 2:
            break
        await asyncio.sleep(0.05)
    assert ids[0] in {m["id"] for m in mem0_srv.memories()}
    assert [m["memory"] for m in mem0_srv.memories()] == ["Owns a cat"] * 2

# ----------------------------------------------------------- model endpoint
async def test_chat_body_answer_tokens_and_scripted_handler(client: httpx.AsyncClient,
                                                            oai_srv: FakeOpenAI) -> None:
    model = ChatModel(client, oai_srv.base_url, "judge-model", api_key="k-oai", retry=FAST)
    labels = {"tenant": "other", "agent": "other", "model": "judge-model", "purpose": "judge",
              "direction": "in"}
    before = metric("memstream_model_tokens_total", **labels)
    oai_srv.script('{"items": []}')
    result = await model.complete([{"role": "user", "content": "one two three"}],
                                  purpose="judge", caller=WHO, max_tokens=50,
                                  json_mode=True)
    assert oai_srv.chat_requests() == [{
        "model": "judge-model", "messages": [{"role": "user", "content": "one two three"}],
        "temperature": 0.0, "max_tokens": 50, "response_format": {"type": "json_object"}}]
    assert oai_srv.requests()[0].headers["Authorization"] == "Bearer k-oai"
    assert (result.text, result.prompt_tokens, result.completion_tokens) == (
        '{"items": []}', 3, 2)
    assert metric("memstream_model_tokens_total", **labels) - before == 3
    oai_srv.handler = lambda body: "conflict:" + body["messages"][-1]["content"]
    answer = await model.complete([{"role": "user", "content": "A vs B"}], purpose="conflict",
                                  caller=WHO)
    assert answer.text == "conflict:A vs B" and len(oai_srv.chat_requests()) == 2


@pytest.mark.parametrize("answer", [NO_CHOICES, None, "   "])
async def test_chat_empty_answer_is_permanent(client: httpx.AsyncClient, oai_srv: FakeOpenAI,
                                              answer: object) -> None:
    model = ChatModel(client, oai_srv.base_url, "m", api_key="k-oai", retry=FAST)
    oai_srv.script(answer)
    with pytest.raises(EmptyModelAnswer):
        await model.complete([{"role": "user", "content": "hi"}], purpose="judge", caller=WHO)
    assert len(oai_srv.chat_requests()) == 1


async def test_chat_retries_and_permanent_errors(client: httpx.AsyncClient,
                                                 oai_srv: FakeOpenAI) -> None:
    model = ChatModel(client, oai_srv.base_url, "m", api_key="k-oai", timeout_s=0.3, retry=FAST)
    msgs = [{"role": "user", "content": "hi"}]
    oai_srv.rate_limit_next(1)
    oai_srv.fail_next(1, 500)
    assert (await model.complete(msgs, purpose="judge", caller=WHO)).text == "[]"
    oai_srv.delay_next(1, 1.0, process=False)
    assert (await model.complete(msgs, purpose="judge", caller=WHO)).text == "[]"
    assert len(oai_srv.chat_requests()) == 5
    quota = {"error": {"message": "quota", "type": "insufficient_quota", "param": None,
                       "code": "insufficient_quota"}}
    oai_srv.fail_next(1, 429, body=quota)
    with pytest.raises(PermanentProviderError):
        await model.complete(msgs, purpose="judge", caller=WHO)
    wrong_key = ChatModel(client, oai_srv.base_url, "m", api_key="nope", retry=FAST)
    with pytest.raises(PermanentProviderError):
        await wrong_key.complete(msgs, purpose="judge", caller=WHO)
    raw = await client.post(f"{oai_srv.base_url}/chat/completions",
                            json={"model": "m", "messages": msgs, "max_token": 5},
                            headers={"Authorization": "Bearer k-oai"})
    assert raw.status_code == 400 and "max_token" in raw.json()["error"]["message"]


async def test_embeddings_keep_order_batch_and_check_dimension(client: httpx.AsyncClient,
                                                               oai_srv: FakeOpenAI) -> None:
    texts = [f"text number {i}" for i in range(7)] + [""]
    embedder = OpenAIEmbedder(client, oai_srv.base_url, "emb", api_key="k-oai", dim=16,
                              retry=FAST, batch_size=3)
    oai_srv.reverse_embeddings = True
    vectors = await embedder.embed(texts)
    assert vectors == [embed_text(t or " ", 16) for t in texts]
    assert [r["input"] for r in oai_srv.embedding_requests()] == [
        texts[0:3], texts[3:6], [texts[6], " "]]
    assert oai_srv.embedding_requests()[0] == {"model": "emb", "input": texts[0:3],
                                               "encoding_format": "float"}
    assert (embedder.name, embedder.dim, await embedder.embed([])) == ("openai:emb", 16, [])
    oai_srv.rate_limit_next(1)
    assert len(await embedder.embed(["again"])) == 1
    wrong_dim = OpenAIEmbedder(client, oai_srv.base_url, "emb", api_key="k-oai", dim=8,
                               retry=FAST)
    with pytest.raises(ProviderBadAnswer):
        await wrong_dim.embed(["x"])


# ------------------------------------------------------------ plumbing, fakes
async def test_backoff_grows_is_capped_and_honours_retry_after() -> None:
    policy = RetryPolicy(attempts=5, initial_s=0.1, max_s=0.3, multiplier=2.0, jitter=False)
    waits: list[float] = []

    async def sleep(s: float) -> None:
        waits.append(s)

    async def failing() -> None:
        raise RetryableProviderError("down")

    with pytest.raises(RetryableProviderError):
        await with_retries(failing, policy, sleep=sleep)
    assert waits == pytest.approx([0.1, 0.2, 0.3, 0.3])
    jittered = RetryPolicy(initial_s=1.0, max_s=10.0)
    assert all(0.5 <= jittered.delay(0) <= 1.0 for _ in range(50))


async def test_fakes_work_as_async_context_managers() -> None:
    async with FakeOpenAI(dim=4) as srv, httpx.AsyncClient() as c:
        embedder = OpenAIEmbedder(c, srv.base_url, "e", dim=4, retry=FAST)
        assert await embedder.embed(["x"]) == [embed_text("x", 4)]


def test_fakes_run_in_sync_code_and_as_a_subprocess() -> None:
    with FakeMem0() as srv, httpx.Client() as c:
        created = c.post(f"{srv.url}/memories", json={
            "messages": [{"role": "user", "content": "hello"}], "user_id": "u"})
        assert created.status_code == 200
        assert len(srv.memories(user_id="u")) == 1
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.memos", "--port", str(port)],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == f"listening on http://127.0.0.1:{port}"
        control = FakeControl(f"http://127.0.0.1:{port}")
        control.fail_next(1, 503, path="/product/add")
        body = {"user_id": "u", "writable_cube_ids": ["c"], "messages": "hi there"}
        with httpx.Client() as c:
            statuses = [c.post(f"http://127.0.0.1:{port}/product/add", json=body).status_code
                        for _ in range(2)]
        assert statuses == [503, 200]
        assert [m["memory"] for m in control.state()] == ["hi there"]
        assert [r["status"] for r in control.requests()] == [503, 200]
        control.close()
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
