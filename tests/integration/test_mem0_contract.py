"""What memstream relies on from Mem0, against the fake and against the real library.

Each test runs twice: on ``tests/fakes/mem0.py`` and on the real ``mem0.Memory``
of the ``mem0ai`` wheel behind the OSS REST routes (``python3
scripts/services.py up mem0``: pgvector, the project's fake model), through
memstream's own client."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import pytest

from streams.adapters.http.client import RetryPolicy
from streams.memory.model import USER_CUBE, MemoryCandidate, readable_cubes
from streams.memory.provider import RetryableProviderError, Scope, SearchRequest
from streams.memory.providers.mem0 import Mem0Provider
from tests.fakes.mem0 import FakeMem0
from tests.support.services import MEM0_PORT, provider_database
from tests.support.worker import ROOT, eventually

pytestmark = pytest.mark.alone  # it stops the PostgreSQL other tests' MemOS and Mem0 use

T0 = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)


@dataclass
class Server:
    url: str
    database_down: Callable[[bool], None]


def fake_database_down(srv: FakeMem0, down: bool) -> None:
    """What the OSS server answers while its database is away: 500 and the library's error."""
    if down:
        srv.fail_always(500)
    else:
        srv.recover()


@pytest.fixture(scope="module", params=["fake", "real"])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    if request.param == "fake":
        with FakeMem0() as srv:
            yield Server(srv.url, lambda down: fake_database_down(srv, down))
        return
    subprocess.run([sys.executable, str(ROOT / "scripts" / "services.py"), "up", "mem0"],
                   check=True, stdout=subprocess.DEVNULL, timeout=600)
    try:
        yield Server(f"http://127.0.0.1:{MEM0_PORT}", lambda down: provider_database(not down))
    finally:
        provider_database(True)


@pytest.fixture
def mem0_url(server: Server) -> str:
    return server.url


@pytest.fixture
async def mem0(mem0_url: str) -> AsyncIterator[Mem0Provider]:
    async with httpx.AsyncClient() as client:
        yield Mem0Provider(client, mem0_url, timeout_s=60,
                           retry=RetryPolicy(attempts=2, initial_s=0.05, max_s=0.1))


@pytest.fixture
def scope() -> Scope:
    return Scope(f"t{uuid.uuid4().hex[:8]}", "alice", "a1")


def fact(text: str, source: str, **kw: object) -> MemoryCandidate:
    return MemoryCandidate(text, source_event_ids=(source,), event_time=T0, **kw)  # type: ignore[arg-type]


def ask(query: str, *, relativity: float = 0.0, top_k: int = 10) -> SearchRequest:
    return SearchRequest(query, readable_cubes("a1"), top_k=top_k, relativity=relativity,
                         dedup=False)


async def test_each_memory_comes_back_as_written(mem0: Mem0Provider, scope: Scope) -> None:
    written = [fact("Alice prefers window seats on flights.", "e1", type="preference"),
               fact("Alice lives in Berlin.", "e2", importance=0.8),
               fact("User: I live in Berlin.", "e3", kind="episode")]
    ids = (await mem0.add(scope, USER_CUBE, written)).ids
    assert len(ids) == len(set(ids)) == 3
    found = {m.id: m for m in await mem0.search(scope, ask("Alice Berlin window seats"))}
    assert set(found) == set(ids)
    for memory_id, cand in zip(ids, written, strict=True):
        got = found[memory_id]
        assert (got.content, got.type, got.kind, got.source_event_ids, got.event_time) == (
            cand.content, cand.type, cand.kind, cand.source_event_ids, T0)
    assert found[ids[1]].importance == 0.8


async def test_the_kinds_masked_in_a_memory_come_back_with_it(
        mem0: Mem0Provider, scope: Scope) -> None:
    ids = (await mem0.add(scope, USER_CUBE, [
        fact("Alice's e-mail address is [EMAIL].", "e1", masked=("email",)),
        fact("Alice's card [CARD] and phone [PHONE].", "e2", masked=("card", "phone")),
        fact("Alice lives in Berlin.", "e3")])).ids
    found = {m.id: m for m in await mem0.search(scope, ask("Alice e-mail card phone Berlin"))}
    assert [found[i].metadata.get("masked") for i in ids] == [
        ["email"], ["card", "phone"], None]


async def test_delete_removes_the_memory_and_only_it(mem0: Mem0Provider, scope: Scope) -> None:
    gone, kept = (await mem0.add(scope, USER_CUBE, [fact("Alice lives in Porto.", "e1"),
                                                    fact("Alice works at Acme.", "e2")])).ids
    await mem0.expire(scope, USER_CUBE, [gone], superseded_by=kept)
    await mem0.expire(scope, USER_CUBE, [gone], superseded_by=kept)  # gone already: done
    assert [m.id for m in await mem0.search(scope, ask("Alice Porto Acme"))] == [kept]


async def test_tenants_and_users_never_see_each_other(mem0: Mem0Provider, scope: Scope) -> None:
    await mem0.add(scope, USER_CUBE, [fact("Alice keeps bees.", "e1")])
    other_tenant = Scope(f"{scope.tenant_id}x", scope.user_id, scope.agent_id)
    other_user = Scope(scope.tenant_id, "bob", scope.agent_id)
    assert await mem0.search(other_tenant, ask("Alice bees")) == []
    assert await mem0.search(other_user, ask("Alice bees")) == []
    assert [m.content for m in await mem0.search(scope, ask("Alice bees"))] == [
        "Alice keeps bees."]


async def test_agent_memories_are_shared_by_the_agents_users(mem0: Mem0Provider,
                                                             scope: Scope) -> None:
    await mem0.add(scope, "agent_a1", [fact("Ask for the city before suggesting trails.",
                                            "e1", scope="agent")])
    bob = Scope(scope.tenant_id, "bob", scope.agent_id)
    [found] = await mem0.search(bob, ask("suggesting trails city"))
    assert (found.cube, found.scope, found.content) == (
        "agent_a1", "agent", "Ask for the city before suggesting trails.")


async def test_the_best_match_comes_first(mem0: Mem0Provider, scope: Scope) -> None:
    await mem0.add(scope, USER_CUBE, [fact("Alice drinks green tea every morning.", "e1"),
                                      fact("Alice plays the cello in an orchestra.", "e2"),
                                      fact("Alice works as a nurse in Lyon.", "e3")])
    found = await mem0.search(scope, ask("Alice drinks green tea every morning."))
    assert found[0].content == "Alice drinks green tea every morning."


async def test_a_relevant_memory_is_found_with_the_query_default_relativity(
        mem0: Mem0Provider, scope: Scope) -> None:
    await mem0.add(scope, USER_CUBE, [fact("Alice likes flat white coffee.", "e1"),
                                      fact("Alice plays the cello.", "e2")])
    found = await mem0.search(scope, ask("what coffee does Alice like", relativity=0.45))
    assert found and found[0].content == "Alice likes flat white coffee."
    assert found[0].score == 1.0  # relative to the best hit, as every provider scores


async def test_every_call_while_the_database_is_down_fails_retryably(
        server: Server, mem0: Mem0Provider, scope: Scope) -> None:
    [kept] = (await mem0.add(scope, USER_CUBE, [fact("Alice lives in Porto.", "e1")])).ids
    server.database_down(True)
    try:
        with pytest.raises(RetryableProviderError):
            await mem0.add(scope, USER_CUBE, [fact("Alice keeps a diary.", "e2")])
        with pytest.raises(RetryableProviderError):
            await mem0.search(scope, ask("Alice diary"))
        with pytest.raises(RetryableProviderError):
            await mem0.expire(scope, USER_CUBE, [kept], superseded_by=None)
    finally:
        server.database_down(False)

    async def answers() -> bool:  # the library's pool drops its dead connections one by one
        try:
            await mem0.search(scope, ask("Alice"))
            return True
        except RetryableProviderError:
            return False

    await eventually(answers, 30, "mem0 answers again")
    assert [m.id for m in await mem0.search(scope, ask("Alice diary Porto"))] == [kept]
