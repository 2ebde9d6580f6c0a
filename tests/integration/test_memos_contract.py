"""What memstream relies on from MemOS, against the fake and against the real server.

Each test runs twice: on ``tests/fakes/memos.py`` and on the MemOS server of the
``MemoryOS`` wheel (``python3 scripts/services.py up memos``: postgres graph on
pgvector, the project's fake model), through memstream's own client. A
difference between the two is a bug in the fake; a failure on both, one in the
client."""

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
from streams.memory.providers.memos import MemOSProvider
from tests.fakes.memos import FakeMemOS
from tests.fakes.server import FakeControl
from tests.support.services import FAKE_OPENAI_PORT, MEMOS_PORT, provider_database
from tests.support.worker import ROOT

pytestmark = pytest.mark.alone  # it stops the PostgreSQL other tests' MemOS and Mem0 use

T0 = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)


@dataclass
class Server:
    url: str
    embedder_down: Callable[[bool], None]
    database_down: Callable[[bool], None]


@pytest.fixture(scope="module", params=["fake", "real"])
def server(request: pytest.FixtureRequest) -> Iterator[Server]:
    if request.param == "fake":
        with FakeMemOS() as srv:
            yield Server(srv.url, lambda down: setattr(srv, "embedder_down", down),
                         lambda down: setattr(srv, "database_down", down))
        return
    subprocess.run([sys.executable, str(ROOT / "scripts" / "services.py"), "up", "memos"],
                   check=True, stdout=subprocess.DEVNULL, timeout=600)
    model = FakeControl(f"http://127.0.0.1:{FAKE_OPENAI_PORT}")  # the server's embedder

    def embedder_down(down: bool) -> None:
        if down:
            model.fail_always(500, path="/v1/embeddings")
        else:
            model.recover()

    try:
        yield Server(f"http://127.0.0.1:{MEMOS_PORT}", embedder_down,
                     lambda down: provider_database(not down))
    finally:
        provider_database(True)
        model.recover()
        model.close()


@pytest.fixture
def memos_url(server: Server) -> str:
    return server.url


RETRY = RetryPolicy(attempts=2, initial_s=0.05, max_s=0.1)


@pytest.fixture
async def memos(memos_url: str) -> AsyncIterator[MemOSProvider]:
    async with httpx.AsyncClient() as client:
        yield MemOSProvider(client, memos_url, timeout_s=60, retry=RETRY)


@pytest.fixture
async def trusting(memos_url: str) -> AsyncIterator[MemOSProvider]:
    """memstream's client taking the server's word for its writes."""
    async with httpx.AsyncClient() as client:
        yield MemOSProvider(client, memos_url, timeout_s=60, retry=RETRY, verify_writes=False)


@pytest.fixture
def scope() -> Scope:
    return Scope(f"t{uuid.uuid4().hex[:8]}", "alice", "a1")


def fact(text: str, source: str, **kw: object) -> MemoryCandidate:
    return MemoryCandidate(text, source_event_ids=(source,), event_time=T0, **kw)  # type: ignore[arg-type]


def ask(query: str, *, dedup: bool = False, top_k: int = 10) -> SearchRequest:
    return SearchRequest(query, readable_cubes("a1"), top_k=top_k, relativity=0.0,
                         dedup=dedup)


async def test_each_memory_comes_back_with_its_type_sources_and_time(
        memos: MemOSProvider, scope: Scope) -> None:
    written = [fact("Alice prefers window seats on flights.", "e1", type="preference"),
               fact("Alice lives in Berlin.", "e2"),
               fact("Alice books trains with the rail tool.", "e3", type="tool",
                    importance=0.8),
               fact("User: I live in Berlin.", "e4", kind="episode")]
    ids = (await memos.add(scope, USER_CUBE, written)).ids
    assert len(ids) == len(set(ids)) == 4
    found = {m.id: m for m in await memos.search(scope, ask("Alice Berlin seats trains"))}
    assert set(found) == set(ids)
    for memory_id, cand in zip(ids, written, strict=True):
        got = found[memory_id]
        assert (got.content, got.type, got.kind, got.source_event_ids, got.event_time) == (
            cand.content, cand.type, cand.kind, cand.source_event_ids, T0)
        assert got.cube == USER_CUBE and got.scope == "user"
    assert found[ids[2]].importance == 0.8


async def test_the_kinds_masked_in_a_memory_come_back_with_it(
        memos: MemOSProvider, scope: Scope) -> None:
    ids = (await memos.add(scope, USER_CUBE, [
        fact("Alice's e-mail address is [EMAIL].", "e1", masked=("email",)),
        fact("Alice's card [CARD] and phone [PHONE].", "e2", masked=("card", "phone")),
        fact("Alice lives in Berlin.", "e3")])).ids
    found = {m.id: m for m in await memos.search(scope, ask("Alice e-mail card phone Berlin"))}
    assert [found[i].metadata.get("masked") for i in ids] == [
        ["email"], ["card", "phone"], None]


async def test_a_deduplicated_search_still_finds_what_is_stored(
        memos: MemOSProvider, scope: Scope) -> None:
    ids = (await memos.add(scope, USER_CUBE, [fact("Alice drinks green tea.", "e1"),
                                              fact("Alice drinks green tea.", "e2"),
                                              fact("Alice plays the cello.", "e3")])).ids
    plain = await memos.search(scope, ask("what does Alice drink"))
    deduped = await memos.search(scope, ask("what does Alice drink", dedup=True))
    assert {m.id for m in plain} == set(ids)
    assert deduped, "a deduplicated search found nothing"
    assert [m.content for m in deduped].count("Alice drinks green tea.") == 1
    assert "Alice plays the cello." in {m.content for m in deduped}


async def test_delete_removes_the_memory_and_only_it(memos: MemOSProvider, scope: Scope) -> None:
    gone, kept = (await memos.add(scope, USER_CUBE, [fact("Alice lives in Porto.", "e1"),
                                                     fact("Alice works at Acme.", "e2")])).ids
    await memos.expire(scope, USER_CUBE, [gone], superseded_by=kept)
    assert [m.id for m in await memos.search(scope, ask("Alice Porto Acme"))] == [kept]


async def test_tenants_and_users_never_see_each_other(memos: MemOSProvider,
                                                      scope: Scope) -> None:
    await memos.add(scope, USER_CUBE, [fact("Alice keeps bees.", "e1")])
    other_tenant = Scope(f"{scope.tenant_id}x", scope.user_id, scope.agent_id)
    other_user = Scope(scope.tenant_id, "bob", scope.agent_id)
    assert await memos.search(other_tenant, ask("Alice bees")) == []
    assert await memos.search(other_user, ask("Alice bees")) == []
    assert [m.content for m in await memos.search(scope, ask("Alice bees"))] == [
        "Alice keeps bees."]


async def test_agent_memories_are_shared_by_the_agents_users(memos: MemOSProvider,
                                                             scope: Scope) -> None:
    await memos.add(scope, "agent_a1", [fact("Ask for the city before suggesting trails.",
                                             "e1", scope="agent")])
    bob = Scope(scope.tenant_id, "bob", scope.agent_id)
    [found] = await memos.search(bob, ask("suggesting trails city"))
    assert (found.cube, found.scope, found.content) == (
        "agent_a1", "agent", "Ask for the city before suggesting trails.")


async def test_an_add_the_server_could_not_store_is_a_retryable_error(
        server: Server, memos: MemOSProvider, scope: Scope) -> None:
    server.embedder_down(True)
    try:
        with pytest.raises(RetryableProviderError, match="no memory"):
            await memos.add(scope, USER_CUBE, [fact("Alice keeps a diary.", "e1")])
    finally:
        server.embedder_down(False)
    [memory_id] = (await memos.add(scope, USER_CUBE, [fact("Alice keeps a diary.", "e1")])).ids
    assert [m.id for m in await memos.search(scope, ask("Alice diary"))] == [memory_id]


async def test_a_relevant_memory_is_found_with_the_query_default_relativity(
        memos: MemOSProvider, scope: Scope) -> None:
    await memos.add(scope, USER_CUBE, [fact("Alice likes flat white coffee.", "e1"),
                                       fact("Alice plays the cello.", "e2")])
    found = await memos.search(scope, SearchRequest(
        "what coffee does Alice like", readable_cubes("a1"), top_k=10, relativity=0.45))
    assert "Alice likes flat white coffee." in {m.content for m in found}
    assert max(m.score for m in found) == 1.0


async def test_an_add_while_the_database_is_down_is_not_taken_as_stored(
        server: Server, memos: MemOSProvider, trusting: MemOSProvider, scope: Scope) -> None:
    server.database_down(True)
    try:
        # the server answers success with an id it never wrote ...
        [claimed] = (await trusting.add(scope, USER_CUBE, [fact("Alice keeps a diary.", "e1")])).ids
        assert claimed
        # ... which memstream's read-back refuses
        with pytest.raises(RetryableProviderError, match="not recorded as stored"):
            await memos.add(scope, USER_CUBE, [fact("Alice keeps a diary.", "e1")])
    finally:
        server.database_down(False)
    assert await memos.search(scope, ask("Alice diary")) == []  # nothing was written
    [memory_id] = (await memos.add(scope, USER_CUBE, [fact("Alice keeps a diary.", "e1")])).ids
    assert [m.id for m in await memos.search(scope, ask("Alice diary"))] == [memory_id]


async def test_a_delete_while_the_database_is_down_answers_success_and_deletes_nothing(
        server: Server, memos: MemOSProvider, scope: Scope) -> None:
    [memory_id] = (await memos.add(scope, USER_CUBE, [fact("Alice lives in Porto.", "e1")])).ids
    server.database_down(True)
    try:
        await memos.expire(scope, USER_CUBE, [memory_id], superseded_by=None)  # no error
    finally:
        server.database_down(False)
    assert [m.id for m in await memos.search(scope, ask("Alice Porto"))] == [memory_id]


async def test_a_delete_by_id_is_not_confined_to_the_cube_it_names(
        memos: MemOSProvider, scope: Scope) -> None:
    """Why memstream deletes only ids it found in, or wrote to, the cube it names."""
    other = Scope(f"{scope.tenant_id}x", "mallory", scope.agent_id)
    [theirs] = (await memos.add(other, USER_CUBE, [fact("Mallory owns a boat.", "e1")])).ids
    await memos.expire(scope, USER_CUBE, [theirs], superseded_by=None)
    assert await memos.search(other, ask("Mallory boat")) == []


async def test_a_constant_score_still_ranks_the_matching_memory_first(
        memos: MemOSProvider, scope: Scope) -> None:
    await memos.add(scope, USER_CUBE, [fact("Alice plays the cello.", "e1"),
                                       fact("Alice has a dog called Rex.", "e2"),
                                       fact("Alice lives in Oslo.", "e3")])
    found = await memos.search(scope, ask("what is the name of the dog of Alice"))
    assert found[0].content == "Alice has a dog called Rex."
    assert found[0].score == 1.0 and all(m.score < 1.0 for m in found[1:])
