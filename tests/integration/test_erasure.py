"""Erasure from the outside, on two workers over Kafka, MariaDB and Redis: a user's
conversations and memories are stored, the user is erased, and then every query
for the user is answered with nothing by every worker, ``memstream history`` and
``/stats`` show nothing, no table holds a row of the user, no Redis key of theirs
is left, the sessions changelog holds tombstones for their conversations, and a
replay of the chat topic from offset 0 into a fresh deployment brings nothing
back; another user of the tenant and the same user id in another tenant keep
everything. The same for one conversation and for one memory."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from streams.stats.access import new_token, token_hash
from tests.integration.conftest import Stack, chat_event, new_stack, session_end_event
from tests.integration.consolidation_support import FAST, memstream, run_status
from tests.integration.erasure_support import (
    ask_every_worker,
    changelog,
    erase,
    redis_keys,
    subject_rows,
    tenant_rows,
)
from tests.support.worker import eventually

ADMIN = new_token()
TOKENS = json.dumps([{"sha256": token_hash(ADMIN), "tenants": ["*"]}])
SAID = {
    ("t1", "u1", "c1"): ["I live in Oslo.", "Noted, Oslo.", "My dog is called Rex.", "Sweet."],
    ("t1", "u1", "c2"): ["I work at Philips.", "Nice.", "I prefer window seats.", "Noted."],
    ("t1", "u2", "c3"): ["I live in Lisbon.", "Noted, Lisbon.", "My cat is called Tom.", "Ok."],
    ("t2", "u1", "c1"): ["I live in Bergen.", "Noted, Bergen.", "My dog is called Fido.", "Ok."],
}


def conversation(tenant: str, user: str, conv: str, lines: list[str],
                 start: int = 0) -> list[dict[str, Any]]:
    events = [chat_event(start + i, conv, tenant=tenant, user_id=user, content=text,
                         created_at=f"2026-11-30T08:00:{start + i:02d}Z")
              for i, text in enumerate(lines)]
    return [*events, session_end_event(conv, tenant=tenant, user_id=user, n=start,
                                       created_at=f"2026-11-30T08:00:{start + 10:02d}Z")]


async def stored(stack: Stack) -> None:
    """Every conversation of SAID published and consolidated."""
    await stack.produce([e for (t, u, c), lines in SAID.items()
                         for e in conversation(t, u, c, lines)])
    for t, _, c in SAID:
        await eventually(lambda t=t, c=c: run_status(stack, f"{t}/{c}#1") == "done", 90,  # type: ignore[misc]
                         f"{t}/{c} consolidated")


def stats_cube(stack: Stack, port: str, tenant: str, user: str) -> dict[str, Any]:
    answer = httpx.get(f"http://127.0.0.1:{port}/stats/cubes/user_profile",
                       params={"tenant": tenant, "user": user},
                       headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10)
    assert answer.status_code == 200, answer.text
    doc: dict[str, Any] = answer.json()
    return doc


def history(stack: Stack, tenant: str, conv: str) -> list[dict[str, Any]]:
    out = memstream(stack, "history", conv, "--tenant", tenant)
    window: dict[str, Any] = json.loads(out.stdout)
    return [*window["messages"], *window["system"], *window["tool"]]


async def test_erasing_a_user(tmp_path: Path) -> None:
    with new_stack(tmp_path) as stack:
        stack.extra_env.update(FAST)
        stack.extra_env["MEMSTREAM_WEB__STATS_TOKENS"] = TOKENS
        workers = [stack.worker().start(), stack.worker().start()]
        await stored(stack)
        port = workers[0].env["MEMSTREAM_WEB__PORT"]

        before = await ask_every_worker(stack, tenant="t1", user="u1", conversation="c1")
        assert all(r.memories and r.short_term and r.short_term["messages"] for r in before)
        assert stats_cube(stack, port, "t1", "u1")["memories"] > 0
        kept_t2, kept_u2 = tenant_rows(stack, "t2"), subject_rows(
            stack, "t1", user="u2", conversations=["c3"])
        assert kept_u2.get("memory") and kept_u2.get("conversation_message") == 4

        dry = erase(stack, "--tenant", "t1", "--user", "u1", "--dry-run")
        assert dry["status"] == "dry_run" and dry["counts"]["conversation_message"] == 8
        assert dry["counts"]["sessions_table"] == 2
        assert subject_rows(stack, "t1", user="u1", conversations=["c1", "c2"])[
            "conversation_message"] == 8  # a dry run changes nothing

        receipt = erase(stack, "--tenant", "t1", "--user", "u1", "--id", "gdpr-1",
                        "--reference", "ticket-7")
        assert receipt["status"] == "done", receipt
        counts = receipt["counts"]
        assert counts["conversation_message"] == 8 and counts["memory"] > 0
        assert counts["consolidation_run"] == 2 and counts["sessions_table"] == 2
        assert counts["redis_keys"] > 0 and counts["consolidation_ledger"] == 8
        print(f"\nreceipt: {counts}")
        assert subject_rows(stack, "t1", user="u1", conversations=["c1", "c2"]) == {}

        after = await ask_every_worker(stack, tenant="t1", user="u1", conversation="c1")
        for reply in after:
            assert reply.error is None, reply.error
            assert reply.memories == [] and not reply.user_profile, reply
            assert not (reply.short_term or {}).get("messages"), reply.short_term
            assert reply.summary is None
        assert history(stack, "t1", "c1") == [] and history(stack, "t1", "c2") == []
        cube = stats_cube(stack, port, "t1", "u1")
        assert cube["memories"] == 0 and cube["items"] == [], cube
        # the queries just asked are the user's new activity (searches logged after the
        # erasure), nothing else
        assert set(subject_rows(stack, "t1", user="u1", conversations=["c1", "c2"])) <= {
            "memory_search_log"}
        assert stack.sql("SELECT COUNT(*) FROM memory_search_log WHERE user_id = 'u1' AND "
                         "tenant_id = 't1' AND created_at < (SELECT finished_at FROM erasure "
                         "WHERE erasure_id = 'gdpr-1')")[0][0] == "0"
        assert stack.sql("SELECT COUNT(*) FROM erasure_conversation")[0][0] == "0"
        assert await redis_keys(stack, "t1", "c1") == [] == await redis_keys(stack, "t1", "c2")
        log = await changelog(stack)
        assert "t1/c1" in log and log["t1/c1"] is None and log["t1/c2"] is None, log
        assert log.get("t1/c3") is not None and log.get("t2/c1") is not None
        # the other user of the tenant and the same user id elsewhere keep everything
        assert tenant_rows(stack, "t2") == kept_t2
        assert subject_rows(stack, "t1", user="u2", conversations=["c3"]) == kept_u2
        other = await ask_every_worker(stack, tenant="t2", user="u1", conversation="c1")
        assert all(any("Bergen" in m.content for m in r.memories) for r in other)

        again = erase(stack, "--tenant", "t1", "--user", "u1", "--id", "gdpr-1")
        assert again["status"] == "done" and again["counts"] == counts  # nothing twice

        # a fresh deployment reads the chat topic from offset 0: nothing of u1 comes back
        replay = stack.worker(app_id=f"{stack.name}-replay").start()
        await eventually(lambda: stack.group_caught_up(f"{stack.name}-replay",
                                                       [stack.topics["chat"]]),
                         90, "the replay read the chat topic")
        await asyncio.sleep(8)  # idle sessions of the replay closed and consolidated
        assert set(subject_rows(stack, "t1", user="u1", conversations=["c1", "c2"])) <= {
            "memory_search_log"}
        assert subject_rows(stack, "t1", user="u2", conversations=["c3"]) == kept_u2
        metrics = httpx.get(f"http://127.0.0.1:{replay.env['MEMSTREAM_WEB__PORT']}/metrics",
                            timeout=10).text
        skipped = [line for line in metrics.splitlines()
                   if line.startswith('memstream_ingest_events_total') and 'outcome="erased"'
                   in line]
        assert sum(float(line.rsplit(" ", 1)[1]) for line in skipped) >= 10, skipped


def memory_id(stack: Stack, tenant: str, user: str, content: str) -> str:
    rows = stack.sql(f"SELECT id FROM memory WHERE tenant_id = '{tenant}' AND user_id = '{user}' "
                     f"AND content = '{content}' AND kind = 'fact'")
    assert len(rows) == 1, rows
    return rows[0][0]


async def test_erasing_a_conversation_a_memory_and_a_tenant(tmp_path: Path) -> None:
    with new_stack(tmp_path) as stack:
        stack.extra_env.update(FAST)
        stack.extra_env["MEMSTREAM_WEB__STATS_TOKENS"] = TOKENS
        worker = stack.worker().start()
        await stored(stack)
        port = worker.env["MEMSTREAM_WEB__PORT"]
        kept_c2 = subject_rows(stack, "t1", conversations=["c2"])

        # one conversation: every row, key and memory of c1 goes, c2 of the same user stays
        receipt = erase(stack, "--tenant", "t1", "--conversation", "c1")
        assert receipt["status"] == "done" and receipt["counts"]["conversation_message"] == 4
        assert receipt["counts"]["sessions_table"] == 1
        assert subject_rows(stack, "t1", conversations=["c1"]) == {}
        assert subject_rows(stack, "t1", conversations=["c2"]) == kept_c2
        assert await redis_keys(stack, "t1", "c1") == [] and history(stack, "t1", "c1") == []
        assert (await changelog(stack))["t1/c1"] is None
        for reply in await ask_every_worker(stack, tenant="t1", user="u1", conversation="c1",
                                            message="Where do I live, where do I work?"):
            assert not (reply.short_term or {}).get("messages")
            assert not any(w in m.content for m in reply.memories for w in ("Oslo", "Rex"))
            assert any("Philips" in m.content for m in reply.memories), reply.memories

        # one memory: it goes from every store; the messages it came from stay
        tom = memory_id(stack, "t1", "u2", "My cat is called Tom.")
        receipt = erase(stack, "--tenant", "t1", "--memory", tom)
        assert receipt["status"] == "done" and receipt["counts"]["memory"] == 1, receipt
        assert subject_rows(stack, "t1", memory_ids=[tom]) == {}
        assert not any(i["content"] == "My cat is called Tom." for i in
                       stats_cube(stack, port, "t1", "u2")["items"])
        for reply in await ask_every_worker(stack, tenant="t1", user="u2",
                                            message="What is my cat called?"):
            assert all(m.id != tom and m.content != "My cat is called Tom."
                       for m in reply.memories), reply.memories
        assert len(history(stack, "t1", "c3")) == 4
        unknown = erase(stack, "--tenant", "t1", "--memory", "999999", check=False)
        assert unknown["status"] == "rejected" and unknown["error"]["code"] == "not_found"

        # a whole tenant; the other keeps everything
        kept_t1 = tenant_rows(stack, "t1")
        receipt = erase(stack, "--tenant", "t2", "--all-of-tenant", "--yes")
        assert receipt["status"] == "done", receipt
        assert not any(tenant_rows(stack, "t2").values()), tenant_rows(stack, "t2")
        assert await redis_keys(stack, "t2") == []
        assert tenant_rows(stack, "t1") == kept_t1

        # rebuilding the tenant's memories from what is stored does not bring Tom back
        out = memstream(stack, "reprocess", "--tenant", "t1", "--user", "u2", "--quiet")
        assert json.loads(out.stdout)["sessions"] == 1, out.stdout
        assert stack.sql("SELECT COUNT(*) FROM memory WHERE content = 'My cat is called Tom.' "
                         "AND valid_to IS NULL")[0][0] == "0"
        assert stack.sql("SELECT COUNT(*) FROM memory WHERE content = 'I live in Lisbon.' "
                         "AND valid_to IS NULL")[0][0] == "1"

        # a fresh deployment replaying the chat topic: nothing erased comes back
        worker.stop()
        before_replay = tenant_rows(stack, "t1")
        stack.worker(app_id=f"{stack.name}-replay").start()
        await eventually(lambda: stack.group_caught_up(f"{stack.name}-replay",
                                                       [stack.topics["chat"]]),
                         90, "the replay read the chat topic")
        await asyncio.sleep(8)
        assert subject_rows(stack, "t1", conversations=["c1"]) == {}
        assert not any(tenant_rows(stack, "t2").values())
        assert stack.sql("SELECT COUNT(*) FROM memory WHERE content = 'My cat is called Tom.'"
                         )[0][0] == "0"
        after_replay = tenant_rows(stack, "t1")
        assert {k: v for k, v in after_replay.items() if k != "memory_search_log"} == {
            k: v for k, v in before_replay.items() if k != "memory_search_log"}


async def test_retention_runs_on_a_schedule(stack: Stack) -> None:
    """Messages stored longer ago than the retention, and consolidated, are deleted on
    the retention's schedule; a back-dated import (an old ``created_at``, stored now)
    and a session not consolidated yet stay."""
    stack.extra_env.update({**FAST, "MEMSTREAM_ERASURE__MESSAGE_RETENTION_DAYS": "30",
                            "MEMSTREAM_ERASURE__RETENTION_INTERVAL_S": "1",
                            # "new" stays open however long the test takes
                            "MEMSTREAM_CONSOLIDATION__IDLE_TIMEOUT_S": "3600"})
    stack.worker().start()
    old = [chat_event(i, "old", created_at=f"2026-01-0{i + 1}T08:00:00Z") for i in range(3)]
    # a minute ago: a conversation of today whatever the hour the test runs at
    now = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
    fresh = [chat_event(i, "new", created_at=(now + timedelta(seconds=i)).isoformat())
             for i in range(3)]
    imported = [chat_event(i, "imported", created_at=f"2026-01-0{i + 1}T08:00:00Z")
                for i in range(3)]
    await stack.produce([*old, session_end_event("old", created_at="2026-01-04T08:00:00Z"),
                         *fresh, *imported])

    def left(conv: str) -> int:
        return int(stack.sql("SELECT COUNT(*) FROM conversation_message "
                             f"WHERE conversation_id = '{conv}'")[0][0])

    await eventually(lambda: left("new") == 3 and left("imported") == 3, 60,
                     "the new and imported messages stored")
    await eventually(lambda: run_status(stack, "t1/old#1") == "done", 90, "old consolidated")
    # stored long ago, as a database kept for months would hold them
    stack.sql("UPDATE conversation_message SET ingested_at = '2026-01-05 00:00:00' "
              "WHERE conversation_id IN ('old', 'new')")
    await eventually(lambda: left("old") == 0, 60, "the old messages deleted")
    assert await redis_keys(stack, "t1", "old") == [] and history(stack, "t1", "old") == []
    # "new" has no session end: not consolidated, kept whatever its age
    assert left("new") == 3 and len(history(stack, "t1", "new")) == 3
    assert left("imported") == 3  # back-dated, stored now


async def test_erasing_a_sub_agent_conversation(stack: Stack) -> None:
    """A sub-agent's chat is stored in its parent conversation: erasing it takes those
    messages (ids compared exactly: ``agent:TASK`` and ``agent:Task`` are others), what
    was judged from them, the parent's cached list and summary; the parent's own
    messages stay."""
    stack.extra_env.update(FAST)
    stack.worker().start()

    def sub(i: int, conv: str, parent: str, user: str, content: str) -> dict[str, Any]:
        return chat_event(i, conv, user_id=user, parent_conversation_id=parent, role="user",
                          content=content, event_id=f"{user}-{conv}-{i}")

    await stack.produce([
        chat_event(0, "P1", content="Hello there."),
        sub(1, "agent:task", "P1", "u1", "I live in Oslo and my IBAN is NO93 8601."),
        sub(2, "agent:task", "P1", "u1", "I keep bees."),
        chat_event(3, "P1", role="assistant", content="Welcome back."),
        sub(1, "agent:TASK", "P2", "u2", "I live in Rome."),
        sub(1, "agent:Task", "P3", "u3", "I live in Bergen."),
        session_end_event("P1", created_at="2026-11-30T08:01:00Z")])
    await eventually(lambda: run_status(stack, "t1/P1#1") == "done", 90, "P1 consolidated")

    def stored(conv: str) -> list[str]:
        return [r[0] for r in stack.sql("SELECT content FROM conversation_message WHERE "
                                        f"conversation_id = '{conv}' ORDER BY id")]

    async def cached(conv: str) -> str:
        r = stack.redis()
        try:
            return " ".join(v.decode() for v in await r.lrange(
                f"{stack.name}:{{t1:{conv}}}:hist", 0, -1))
        finally:
            await r.aclose()

    def kept() -> str:
        return " ".join(r[0] for r in stack.sql("SELECT content FROM memory"))

    await eventually(lambda: len(stored("P1")) == 4, 30, "the sub-agent chat in its parent")
    # judged in P1's runs (the sub-agent's messages came by the re-key topic, later)
    await eventually(lambda: "bees" in kept() and "IBAN" in kept(), 60, "the memories")

    receipt = erase(stack, "--tenant", "t1", "--conversation", "agent:task")
    assert receipt["status"] == "done", receipt
    assert receipt["counts"]["conversation_message"] == 2, receipt
    assert stored("P1") == ["Hello there.", "Welcome back."]
    assert stored("P2") == ["I live in Rome."] and stored("P3") == ["I live in Bergen."]
    assert "IBAN" not in await cached("P1") and "bees" not in await cached("P1")
    assert not any("IBAN" in m["content"] for m in history(stack, "t1", "P1"))
    for table in ("memory", "consolidation_candidate", "conversation_summary"):
        column = "summary" if table == "conversation_summary" else "content"
        held = " ".join(r[0] for r in stack.sql(f"SELECT {column} FROM {table}"))
        assert "IBAN" not in held and "bees" not in held, (table, held)
