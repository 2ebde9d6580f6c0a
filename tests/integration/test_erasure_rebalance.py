"""An erasure waiting for its fence never holds up a rebalance (issue 41, finding 7),
on two workers over Kafka, MariaDB and Redis.

The worker that does not hold ``memory.erasures`` is frozen (SIGSTOP: a node
that hangs), and a user erasure is sent. The other worker's erase agent fences
every ingest partition and waits for the frozen worker's. After the session
timeout the group rebalances those partitions to the live worker — and Faust,
before it lets the rebalance go on, waits for every record it handed out, the
erasure request among them, while the partitions whose fence it waits for are
paused by that same rebalance. The erase agent lets the request go at once (it
is produced to the end of the queue again and acknowledged), the rebalance
completes, the live worker reads the fence on the partitions it took over, and
the request, delivered again, finishes the erasure: the caller gets ``done``
within a minute, the worker logged the release, and it stays live and ready.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time

import httpx
import pytest

from tests.integration.conftest import Stack, chat_event
from tests.integration.erasure_support import erase, subject_rows
from tests.integration.query_support import health
from tests.support.worker import MEMSTREAM, ROOT, eventually

pytestmark = pytest.mark.integration
CONVERSATIONS = 8


def handled(worker: object, outcome: str) -> float:
    port = worker.env["MEMSTREAM_WEB__PORT"]  # type: ignore[attr-defined]
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("memstream_erasures_total{") and f'outcome="{outcome}"' in line)


async def test_an_erasure_waiting_for_a_frozen_workers_fence_lets_the_rebalance_go(
        stack: Stack) -> None:
    first = stack.worker().start()
    await stack.produce([chat_event(i, f"c{c}", user_id="u1", content=f"line {i} of c{c}")
                         for c in range(CONVERSATIONS) for i in range(3)])
    await eventually(lambda: subject_rows(stack, "t1", user="u1").get(
        "conversation_message") == 3 * CONVERSATIONS, 90, "every message stored")
    second = stack.worker().start()
    for w in (first, second):
        await eventually(lambda w=w: health(w, "ready")[0] == 200, 90, "both ready")  # type: ignore[misc]
    await asyncio.sleep(3)  # the assignment settled

    # which worker holds memory.erasures: the one that answers a dry run
    dry = erase(stack, "--tenant", "t1", "--user", "u1", "--dry-run")
    assert dry["status"] == "dry_run", dry
    owner, other = (first, second) if handled(first, "dry_run") else (second, first)
    assert handled(owner, "dry_run") == 1

    assert other.proc is not None
    os.kill(other.proc.pid, signal.SIGSTOP)  # a hung node: its partitions pass no fence
    try:
        started = time.monotonic()
        caller = subprocess.Popen(
            [*MEMSTREAM, "erase", "--tenant", "t1", "--user", "u1", "--id", "frozen",
             "--quiet", "--timeout", "150"], cwd=ROOT, env={**os.environ, **stack.env()},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = await asyncio.to_thread(caller.communicate, timeout=170)
        took = time.monotonic() - started
        assert caller.returncode == 0, (out, err, owner.log_tail())
        assert '"status": "done"' in out or '"status":"done"' in out, out
        assert took < 60, f"the erasure took {took:.0f}s"
        assert subject_rows(stack, "t1", user="u1") == {}
        assert "its turn is over (rebalance)" in owner.log_tail(200_000)
        assert handled(owner, "requeued") >= 1
        assert health(owner, "live")[0] == 200 and health(owner, "ready")[0] == 200
    finally:
        os.kill(other.proc.pid, signal.SIGCONT)
    again = erase(stack, "--tenant", "t1", "--user", "u1", "--id", "frozen")
    assert again["status"] == "done"
