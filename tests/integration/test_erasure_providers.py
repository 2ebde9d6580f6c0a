"""Erasure through the real providers: a user's memories consolidated into MemOS (the
server of the ``MemoryOS`` wheel) or Mem0 (``mem0.Memory``), plus a copy memstream
holds no id of (as a retried add whose answer was lost leaves one), are gone from
the provider after the user is erased: a search of the provider finds nothing of
the user, a query over Kafka returns nothing, no table holds a row of the user;
another user's memories stay."""

from __future__ import annotations

import subprocess
import sys
import uuid

import httpx
import pytest

from streams.memory.model import USER_CUBE, MemoryCandidate
from streams.memory.provider import Scope, SearchRequest
from streams.memory.providers.mem0 import Mem0Provider
from streams.memory.providers.memos import MemOSProvider
from tests.integration.conftest import Stack, chat_event, session_end_event
from tests.integration.consolidation_support import FAST, run_status, set_agent
from tests.integration.erasure_support import ask_every_worker, erase, subject_rows
from tests.support.services import MEM0_PORT, MEMOS_PORT
from tests.support.worker import ROOT, eventually

URLS = {"memos": f"http://127.0.0.1:{MEMOS_PORT}", "mem0": f"http://127.0.0.1:{MEM0_PORT}"}
SETTING = {"memos": "MEMSTREAM_MEMOS__BASE_URL", "mem0": "MEMSTREAM_MEM0__BASE_URL"}


async def held(provider: str, tenant: str, user: str) -> list[str]:
    """Every memory text of the user's cube in the real provider."""
    async with httpx.AsyncClient() as client:
        p: MemOSProvider | Mem0Provider = (MemOSProvider(client, URLS[provider], timeout_s=60)
                                          if provider == "memos"
                                          else Mem0Provider(client, URLS[provider], timeout_s=60))
        found = await p.search(Scope(tenant, user, "a1"), SearchRequest(
            "Oslo Rex dog Philips work hobby Lisbon cat", [USER_CUBE], top_k=100,
            relativity=0.0, dedup=False))
    return sorted(m.content for m in found)


async def stray_copy(provider: str, tenant: str, user: str) -> None:
    """A memory written to the provider without memstream recording its id."""
    async with httpx.AsyncClient() as client:
        p: MemOSProvider | Mem0Provider = (MemOSProvider(client, URLS[provider], timeout_s=60)
                                          if provider == "memos"
                                          else Mem0Provider(client, URLS[provider], timeout_s=60))
        await p.add(Scope(tenant, user, "a1"), USER_CUBE,
                    [MemoryCandidate("My hobby is sailing in Oslo.")])


@pytest.mark.parametrize("provider", ["memos", "mem0"])
async def test_erasing_a_user_reaches_the_real_provider(stack: Stack, provider: str) -> None:
    subprocess.run([sys.executable, str(ROOT / "scripts" / "services.py"), "up", provider],
                   check=True, stdout=subprocess.DEVNULL, timeout=600)
    tenant = f"e{uuid.uuid4().hex[:8]}"
    stack.extra_env.update(FAST)
    stack.extra_env[SETTING[provider]] = URLS[provider]
    set_agent(stack, tenant, "a1", "--provider", provider.upper(), "--open-long-memory", "on",
              "--model", "chat-model")
    stack.worker().start()
    await stack.produce([
        chat_event(0, "c1", tenant=tenant, content="I live in Oslo. My dog is called Rex."),
        chat_event(1, "c1", tenant=tenant, content="Noted."),
        chat_event(2, "c1", tenant=tenant, content="I work at Philips."),
        session_end_event("c1", tenant=tenant),
        chat_event(0, "c2", tenant=tenant, user_id="u2", content="I live in Lisbon."),
        chat_event(1, "c2", tenant=tenant, user_id="u2", content="Noted, Lisbon."),
        session_end_event("c2", tenant=tenant, user_id="u2")])
    for conv in ("c1", "c2"):
        await eventually(lambda c=conv: run_status(stack, f"{tenant}/{c}#1") == "done", 90,  # type: ignore[misc]
                         f"{conv} consolidated")
    await stray_copy(provider, tenant, "u1")
    before = await held(provider, tenant, "u1")
    assert "I live in Oslo." in before and "My hobby is sailing in Oslo." in before, before
    kept = await held(provider, tenant, "u2")
    assert "I live in Lisbon." in kept

    receipt = erase(stack, "--tenant", tenant, "--user", "u1")
    assert receipt["status"] == "done", receipt
    assert receipt["counts"][provider] == len(before), receipt  # the stray copy too
    print(f"\n{provider}: {receipt['counts']} {receipt['warnings']}")
    assert await held(provider, tenant, "u1") == []
    assert await held(provider, tenant, "u2") == kept
    assert subject_rows(stack, tenant, user="u1", conversations=["c1"]) == {}
    for reply in await ask_every_worker(stack, tenant=tenant, user="u1",
                                        message="Where do I live, where do I work?"):
        assert reply.error is None and reply.memories == [], reply
    if provider == "mem0":  # what memstream cannot reach, said in the receipt
        assert any("history" in w for w in receipt["warnings"])
