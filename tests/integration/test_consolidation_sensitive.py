"""Sensitive content through Kafka into the built-in provider on MariaDB, with the
worker's real scanner: the default policy masks an e-mail address, drops a stated
password and keeps a name; an agent's policy set on the agent-config topic drops the
e-mail and masks the password instead. Neither the memories, nor the run's candidate
rows, nor the worker's log hold what was kept out; the memory records which kinds
were masked, and the worker counts per tenant, kind and action, in its metrics and in
its stats API (``/stats/sensitive``, the tenant's own counts only)."""

from __future__ import annotations

import json
import re

import httpx

from streams.stats.access import new_token, token_hash
from tests.integration.conftest import Stack, chat_event, session_end_event
from tests.integration.consolidation_support import FAST, run_status, set_agent
from tests.support.worker import eventually

EMAIL, PASSWORD = "ann.lee@fastmail.com", "Tr0ub4dor&3x"
T1, T2 = new_token(), new_token()  # stats tokens of tenant t1, of tenant t2
TOKENS = json.dumps([{"sha256": token_hash(T1), "tenants": ["t1"]},
                     {"sha256": token_hash(T2), "tenants": ["t2"]}])
COUNTED = re.compile(r'^memstream_sensitive_memories_total\{action="(\w+)",kind="(\w+)",'
                     r'tenant="other"\} (\S+)$', re.M)
SAID = [f"You can reach me at {EMAIL} any time.", "Sure.",
        f"My password is {PASSWORD} for the team wiki.", "Noted.",
        "My sister is called Ana.", "Nice."]


def session(conv: str, agent: str) -> list[dict[str, object]]:
    return [*(chat_event(i, conv, content=text, agent_id=agent) for i, text in enumerate(SAID)),
            session_end_event(conv, agent_id=agent)]


def stored(stack: Stack, conv: str) -> dict[str, str]:
    """The episodes of ``conv`` (content -> masked kinds)."""
    rows = stack.sql("SELECT content, COALESCE(masked, '') FROM memory "
                     f"WHERE kind = 'episode' AND source_event_ids LIKE '%t1-{conv}-%'")
    return {r[0]: r[1] for r in rows}


def held_anywhere(stack: Stack, secret: str) -> list[str]:
    return [t for t, col in (("memory", "content"), ("consolidation_candidate", "content"))
            if stack.sql(f"SELECT COUNT(*) FROM {t} WHERE {col} LIKE '%{secret}%'")[0][0] != "0"]


async def test_each_action_through_kafka_into_the_builtin_provider(stack: Stack) -> None:
    stack.extra_env.update({**FAST, "MEMSTREAM_WEB__STATS_TOKENS": TOKENS})
    set_agent(stack, "t1", "a2", "--provider", "MYSQL", "--open-long-memory", "on",
              "--model", "chat-model", "--sensitive", "email=drop",
              "--sensitive", "secret=mask")
    worker = stack.worker().start()
    await stack.produce([*session("c1", "a1"), *session("c2", "a2")])
    await eventually(lambda: run_status(stack, "t1/c1#1") == "done"
                     and run_status(stack, "t1/c2#1") == "done", 90, "both sessions")

    default = stored(stack, "c1")  # the deployment's policy
    assert default["User: You can reach me at [EMAIL] any time."] == "email"  # mask
    assert not [c for c in default if "password" in c]  # drop
    assert default["User: My sister is called Ana."] == ""  # keep
    override = stored(stack, "c2")  # the agent's policy
    assert not [c for c in override if "reach me" in c]  # drop
    assert override["User: My password is [SECRET] for the team wiki."] == "secret"  # mask
    assert "User: My sister is called Ana." in override

    assert held_anywhere(stack, EMAIL) == [] and held_anywhere(stack, PASSWORD) == []
    log = worker.log_text()
    assert EMAIL not in log and PASSWORD not in log
    web = f"http://127.0.0.1:{worker.env['MEMSTREAM_WEB__PORT']}"
    metrics = httpx.get(f"{web}/metrics", timeout=5).text
    for kind, action in (("email", "mask"), ("secret", "drop"), ("email", "drop"),
                         ("secret", "mask")):
        assert (f'memstream_sensitive_memories_total{{action="{action}",kind="{kind}",'
                f'tenant="other"}}') in metrics

    # the stats API: t1's counts (the only tenant here, so the metric's "other" ones)
    stats = httpx.get(f"{web}/stats/sensitive", params={"tenant": "t1"}, timeout=5,
                      headers={"Authorization": f"Bearer {T1}"})
    assert stats.status_code == 200, stats.text
    counted = {(kind, action): int(float(n)) for action, kind, n in COUNTED.findall(metrics)}
    shown = {(kind, action): n for kind, actions in stats.json()["kinds"].items()
             for action, n in actions.items() if n}
    assert shown == {k: n for k, n in counted.items() if n}, (shown, counted)
    assert {("email", "mask"), ("secret", "drop"), ("email", "drop"),
            ("secret", "mask")} <= set(shown)
    other = httpx.get(f"{web}/stats/sensitive", params={"tenant": "t2"}, timeout=5,
                      headers={"Authorization": f"Bearer {T2}"})
    assert other.status_code == 200 and other.json()["total"] == {"keep": 0, "mask": 0,
                                                                  "drop": 0}
    refused = httpx.get(f"{web}/stats/sensitive", params={"tenant": "t1"}, timeout=5,
                        headers={"Authorization": f"Bearer {T2}"})
    assert refused.status_code == 403
