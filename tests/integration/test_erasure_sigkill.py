"""SIGKILL of the worker in the middle of an erasure: part of the user's messages are
deleted, the rest not yet; once a worker runs again the request is delivered
again and the erasure completes where it stopped — every row of the user gone,
each counted once in the receipt (the caller, still waiting, gets it), another
user untouched, and the same request once more changes nothing."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess

from sqlalchemy import text

from tests.integration.conftest import Stack, chat_event
from tests.integration.erasure_support import subject_rows
from tests.support.worker import MEMSTREAM, ROOT, eventually

CONVERSATIONS, PER_CONVERSATION = 100, 60


def user_events(user: str, conversations: int) -> list[dict[str, object]]:
    return [chat_event(i, f"{user}-c{c}", user_id=user, content=f"{user} says {i} in {c}",
                       created_at=f"2026-11-30T08:{i // 60:02d}:{i % 60:02d}Z")
            for c in range(conversations) for i in range(PER_CONVERSATION)]


async def test_sigkill_mid_erasure_completes_on_restart(stack: Stack) -> None:
    stack.extra_env["MEMSTREAM_ERASURE__CHUNK_ROWS"] = "25"  # many small transactions
    worker = stack.worker().start()
    total = CONVERSATIONS * PER_CONVERSATION
    await stack.produce(user_events("u1", CONVERSATIONS) + user_events("u2", 3))
    engine = stack.engine()
    try:
        async def count(sql: str) -> int:
            async with engine.connect() as conn:
                return int((await conn.execute(text(sql))).scalar_one() or 0)

        async def all_stored() -> bool:
            return await count("SELECT COUNT(*) FROM conversation_message") == \
                total + 3 * PER_CONVERSATION

        await eventually(all_stored, 120, "every message stored")
        kept = subject_rows(stack, "t1", user="u2", conversations=[f"u2-c{c}" for c in range(3)])

        caller = subprocess.Popen(
            [*MEMSTREAM, "erase", "--tenant", "t1", "--user", "u1", "--id", "kill-1", "--quiet",
             "--timeout", "300"], cwd=ROOT, env={**os.environ, **stack.env()},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deleted = ("SELECT COALESCE(SUM(c.count), 0) FROM erasure_count c JOIN erasure e "
                   "ON e.seq = c.seq WHERE e.erasure_id = 'kill-1' AND "
                   "c.store = 'conversation_message'")
        while not 0 < await count(deleted) < total // 2:
            assert caller.poll() is None, caller.communicate()
            await asyncio.sleep(0.02)
        worker.kill()
        left = await count("SELECT COUNT(*) FROM conversation_message WHERE user_id = 'u1'")
        status = await count("SELECT COUNT(*) FROM erasure WHERE status = 'deleting'")
        assert 0 < left < total and status == 1, (left, status)
        print(f"\nkilled with {total - left} of {total} messages deleted")

        stack.worker().start()
        out, err = await asyncio.to_thread(caller.communicate, timeout=300)
        assert caller.returncode == 0, err
        receipt = json.loads(out)
        assert receipt["status"] == "done"
        assert receipt["counts"]["conversation_message"] == total  # each once
        assert receipt["counts"]["sessions_table"] == CONVERSATIONS
        assert subject_rows(stack, "t1", user="u1",
                            conversations=[f"u1-c{c}" for c in range(CONVERSATIONS)]) == {}
        assert subject_rows(stack, "t1", user="u2",
                            conversations=[f"u2-c{c}" for c in range(3)]) == kept

        again = subprocess.run(
            [*MEMSTREAM, "erase", "--tenant", "t1", "--user", "u1", "--id", "kill-1", "--quiet"],
            cwd=ROOT, env={**os.environ, **stack.env()}, capture_output=True, text=True,
            timeout=120)
        assert json.loads(again.stdout)["counts"] == receipt["counts"]
    finally:
        await engine.dispose()
