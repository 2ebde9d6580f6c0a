"""A session through each real provider, end to end: chat events in, the session
closed, the judged memories stored in MemOS (the server of the ``MemoryOS``
wheel) or Mem0 (``mem0.Memory``), then a query over Kafka that returns them
with the types the judge gave them; and the provider's database stopped mid-run:
nothing recorded as stored that was not, the closing event retried until the
database is back, each memory then stored once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import httpx
import pytest

from streams.memory.model import USER_CUBE
from streams.memory.provider import Scope, SearchRequest
from streams.memory.providers.mem0 import Mem0Provider
from streams.memory.providers.memos import MemOSProvider
from tests.integration.conftest import Stack, chat_event, session_end_event
from tests.integration.consolidation_support import FAST, run_status, set_agent
from tests.support.services import MEM0_PORT, MEMOS_PORT, provider_database
from tests.support.worker import ROOT, eventually

pytestmark = pytest.mark.alone  # it stops the PostgreSQL other tests' MemOS and Mem0 use

URLS = {"memos": f"http://127.0.0.1:{MEMOS_PORT}", "mem0": f"http://127.0.0.1:{MEM0_PORT}"}
SETTING = {"memos": "MEMSTREAM_MEMOS__BASE_URL", "mem0": "MEMSTREAM_MEM0__BASE_URL"}


def judged(stack: Stack, closed_id: str) -> dict[str, str]:
    """What the judge made of the session: fact text -> type."""
    rows = stack.sql("SELECT content, type FROM consolidation_candidate "
                     f"WHERE closed_id = '{closed_id}' AND kind = 'fact'")
    return {r[0]: r[1] for r in rows}


@pytest.mark.parametrize("provider", ["memos", "mem0"])
async def test_a_session_reaches_the_real_provider_and_a_query_finds_it(
        stack: Stack, provider: str) -> None:
    subprocess.run([sys.executable, str(ROOT / "scripts" / "services.py"), "up", provider],
                   check=True, stdout=subprocess.DEVNULL, timeout=600)
    tenant = f"r{uuid.uuid4().hex[:8]}"
    stack.extra_env.update(FAST)
    stack.extra_env[SETTING[provider]] = URLS[provider]
    set_agent(stack, tenant, "a1", "--provider", provider.upper(), "--open-long-memory", "on",
              "--model", "chat-model")  # long memory needs a model bound (the rule judge runs)
    stack.worker().start()
    await stack.produce([
        chat_event(0, "c1", tenant=tenant, content="I live in Oslo. I prefer window seats."),
        chat_event(1, "c1", tenant=tenant, content="Noted, Oslo and window seats."),
        chat_event(2, "c1", tenant=tenant, content="My dog is called Rex."),
        session_end_event("c1", tenant=tenant)])
    closed = f"{tenant}/c1#1"
    await eventually(lambda: run_status(stack, closed) == "done", 90, "the session consolidated")
    facts = judged(stack, closed)
    assert {"I live in Oslo.", "My dog is called Rex."} <= set(facts)
    assert stack.sql("SELECT COUNT(*) FROM memory")[0][0] == "0"  # nothing went elsewhere

    out = subprocess.run(
        [sys.executable, "-m", "streams.cli", "query", "--tenant", tenant, "--user", "u1",
         "--agent", "a1", "--no-short-term", "--timeout", "30",
         "where does the user live, what seats does the user prefer, what is the dog called"],
        env={**os.environ, **stack.env()}, cwd=ROOT, capture_output=True, text=True,
        timeout=60)
    assert out.returncode == 0, out.stderr
    reply = json.loads(out.stdout)
    assert reply["long_term"]["provider"] == provider and not reply.get("warnings")
    returned = {m["content"]: m["type"] for m in reply["memories"] if m["kind"] == "fact"}
    assert returned, reply
    for content, kind in returned.items():
        assert facts.get(content) == kind, (content, kind, facts)
    assert "I live in Oslo." in returned
    print(f"\n{provider}: judged {facts}; the query returned {returned}")


def recorded(stack: Stack, closed_id: str) -> tuple[int, int]:
    """What memstream holds as stored for a run: candidates with an id, origins."""
    with_id = stack.sql("SELECT COUNT(*) FROM consolidation_candidate "
                        f"WHERE closed_id = '{closed_id}' AND memory_id IS NOT NULL")
    origins = stack.sql(f"SELECT COUNT(*) FROM memory_origin WHERE closed_id = '{closed_id}'")
    return int(with_id[0][0]), int(origins[0][0])


async def provider_copies(provider: str, tenant: str) -> list[str]:
    """Every memory text in the user's cube of the real provider (repeats kept)."""
    async with httpx.AsyncClient() as client:
        if provider == "memos":
            client_: MemOSProvider | Mem0Provider = MemOSProvider(client, URLS[provider],
                                                                  timeout_s=60)
        else:
            client_ = Mem0Provider(client, URLS[provider], timeout_s=60)
        found = await client_.search(Scope(tenant, "u1", "a1"), SearchRequest(
            "Oslo Rex dog Philips work", [USER_CUBE], top_k=100, relativity=0.0,
            dedup=False))
    return sorted(m.content for m in found)


@pytest.mark.parametrize("provider", ["memos", "mem0"])
async def test_the_providers_database_stopped_mid_run(stack: Stack, provider: str) -> None:
    subprocess.run([sys.executable, str(ROOT / "scripts" / "services.py"), "up", provider],
                   check=True, stdout=subprocess.DEVNULL, timeout=600)
    tenant = f"o{uuid.uuid4().hex[:8]}"
    stack.extra_env.update(FAST)
    stack.extra_env.update({  # retried until the database is back (well before a dead letter)
        SETTING[provider]: URLS[provider], "MEMSTREAM_CONSOLIDATION__RETRY_ATTEMPTS": "40",
        "MEMSTREAM_CONSOLIDATION__RETRY_BACKOFF_INITIAL_S": "0.5",
        "MEMSTREAM_CONSOLIDATION__RETRY_BACKOFF_MAX_S": "1"})
    set_agent(stack, tenant, "a1", "--provider", provider.upper(), "--open-long-memory", "on",
              "--model", "chat-model")
    stack.worker().start()
    await stack.produce([chat_event(0, "c1", tenant=tenant, content="I live in Oslo."),
                         session_end_event("c1", tenant=tenant)])
    await eventually(lambda: run_status(stack, f"{tenant}/c1#1") == "done", 90, "the first run")

    provider_database(False)
    try:
        await stack.produce([
            chat_event(0, "c2", tenant=tenant, content="My dog is called Rex."),
            chat_event(1, "c2", tenant=tenant, content="Noted."),
            chat_event(2, "c2", tenant=tenant, content="I work at Philips."),
            session_end_event("c2", tenant=tenant)])
        retries = await stack.read_topic(stack.topics["retry"], expect=2, timeout=90)
        assert len(retries) >= 2, "the closing event was not retried"
        assert run_status(stack, f"{tenant}/c2#1") != "done"
        assert recorded(stack, f"{tenant}/c2#1") == (0, 0)  # nothing taken as stored
    finally:
        provider_database(True)
    await eventually(lambda: run_status(stack, f"{tenant}/c2#1") == "done", 120,
                     "the run once the database is back")
    facts = judged(stack, f"{tenant}/c2#1")
    assert {"My dog is called Rex.", "I work at Philips."} <= set(facts)
    assert recorded(stack, f"{tenant}/c2#1") == (len(facts), len(facts))
    assert await stack.read_topic(stack.topics["dlq"]) == []
    copies = await provider_copies(provider, tenant)
    assert copies == sorted([*judged(stack, f"{tenant}/c1#1"), *facts]), copies  # each stored once
    print(f"\n{provider}: {len(retries)} attempts retried during the outage; "
          f"stored once each: {copies}")
