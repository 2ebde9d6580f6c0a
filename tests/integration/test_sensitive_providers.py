"""Sensitive content through Kafka into the real MemOS (the server of the ``MemoryOS``
wheel) and the real Mem0 (``mem0.Memory``), with the worker's real scanner: the
deployment's policy masks an e-mail address, drops a stated password and keeps a
name; an agent's policy on the agent-config topic drops the e-mail address and masks
the password instead. Read back from the provider through memstream's adapter: the
masked memory holds the placeholder and records which kinds were masked in it, the
dropped one is not there, the name is; neither the provider, nor the run's candidate
rows, nor the worker's log hold what was kept out."""

from __future__ import annotations

import subprocess
import sys
import uuid

import httpx
import pytest

from streams.memory.model import USER_CUBE, StoredMemory
from streams.memory.provider import Scope, SearchRequest
from streams.memory.providers.mem0 import Mem0Provider
from streams.memory.providers.memos import MemOSProvider
from tests.integration.conftest import Stack, chat_event, session_end_event
from tests.integration.consolidation_support import FAST, run_status, set_agent
from tests.integration.test_real_providers import SETTING, URLS
from tests.support.worker import ROOT, eventually

EMAIL, PASSWORD = "ann.lee@fastmail.com", "Tr0ub4dor&3x"
SAID = [f"My email address is {EMAIL}.", "Noted.",
        f"My team wiki password is {PASSWORD}.", "Noted.",
        "My sister is called Ana.", "Nice."]
MASKED_EMAIL = "My email address is [EMAIL]."
MASKED_PASSWORD = "My team wiki password is [SECRET]."
NAME = "My sister is called Ana."


def session(tenant: str, conv: str, user: str, agent: str) -> list[dict[str, object]]:
    return [*(chat_event(i, conv, tenant=tenant, content=text, user_id=user, agent_id=agent)
              for i, text in enumerate(SAID)),
            session_end_event(conv, tenant=tenant, user_id=user, agent_id=agent)]


async def held(provider: str, scope: Scope) -> list[StoredMemory]:
    """Every memory of the user's and the agent's cubes, read through memstream's
    adapter of the real provider."""
    async with httpx.AsyncClient() as client:
        adapter: MemOSProvider | Mem0Provider = (
            MemOSProvider(client, URLS[provider], timeout_s=60) if provider == "memos"
            else Mem0Provider(client, URLS[provider], timeout_s=60))
        return await adapter.search(scope, SearchRequest(
            "email address password team wiki sister", [USER_CUBE, f"agent_{scope.agent_id}"],
            top_k=100, relativity=0.0, dedup=False))


def candidate_rows(stack: Stack, closed_id: str) -> list[str]:
    return [r[0] for r in stack.sql("SELECT content FROM consolidation_candidate "
                                    f"WHERE closed_id = '{closed_id}'")]


@pytest.mark.parametrize("provider", ["memos", "mem0"])
async def test_each_action_through_kafka_into_the_real_provider(stack: Stack,
                                                                provider: str) -> None:
    subprocess.run([sys.executable, str(ROOT / "scripts" / "services.py"), "up", provider],
                   check=True, stdout=subprocess.DEVNULL, timeout=600)
    tenant = f"s{uuid.uuid4().hex[:8]}"
    stack.extra_env.update(FAST)
    stack.extra_env[SETTING[provider]] = URLS[provider]
    for agent, policy in (("a1", ()), ("a2", ("--sensitive", "email=drop",
                                              "--sensitive", "secret=mask"))):
        set_agent(stack, tenant, agent, "--provider", provider.upper(),
                  "--open-long-memory", "on", "--model", "chat-model", *policy)
    worker = stack.worker().start()
    await stack.produce([*session(tenant, "c1", "u1", "a1"), *session(tenant, "c2", "u2", "a2")])
    await eventually(lambda: run_status(stack, f"{tenant}/c1#1") == "done"
                     and run_status(stack, f"{tenant}/c2#1") == "done", 90, "both sessions")

    default = {m.content: m.metadata.get("masked") for m in
               await held(provider, Scope(tenant, "u1", "a1"))}  # the deployment's policy
    assert default == {MASKED_EMAIL: ["email"], NAME: None}, default  # mask, drop, keep
    override = {m.content: m.metadata.get("masked") for m in
                await held(provider, Scope(tenant, "u2", "a2"))}  # the agent's policy
    assert override == {MASKED_PASSWORD: ["secret"], NAME: None}, override  # drop, mask, keep

    rows = candidate_rows(stack, f"{tenant}/c1#1") + candidate_rows(stack, f"{tenant}/c2#1")
    assert rows and not [r for r in rows if EMAIL in r or PASSWORD in r]
    assert stack.sql("SELECT COUNT(*) FROM memory")[0][0] == "0"  # nothing went elsewhere
    log = worker.log_text()
    assert EMAIL not in log and PASSWORD not in log
    print(f"\n{provider}: deployment's policy {default}; agent's policy {override}")
