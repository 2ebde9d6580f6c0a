"""Nothing secret in the open: after a run with failures (a provider that
fails and echoes credentials in its error, poison chat events, refused and
malformed queries), no SQL, message content or credential is in any reply,
dead-letter or retry header, metric label or log line at info level."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from tests.fakes.memos import FakeMemOS
from tests.integration.conftest import Stack, chat_event, session_end_event
from tests.integration.consolidation_support import FAST, run_status, set_agent
from tests.support.worker import ROOT, eventually

API_KEY = "k-secret-abc123"
LEAKY = (f"upstream rejected Authorization: Token {API_KEY}; password=hunter2 "
         "for mysql+aiomysql://root:rootpw@db:3306/x [SQL: SELECT * FROM secrets]")
SECRETS = (API_KEY, "hunter2", "rootpw", "MARKER", "[SQL:", "SELECT *", "INSERT INTO")


@pytest.fixture
def memos() -> Iterator[FakeMemOS]:
    with FakeMemOS(api_key=API_KEY) as server:
        yield server


def _clean(where: str, text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret!r} in {where}: {text[:2000]}"


async def test_no_secret_in_replies_headers_metrics_or_logs(stack: Stack,
                                                            memos: FakeMemOS) -> None:
    stack.extra_env.update(FAST)
    stack.extra_env.update({"MEMSTREAM_MEMOS__BASE_URL": memos.url,
                            "MEMSTREAM_MEMOS__API_KEY": API_KEY,
                            "MEMSTREAM_CONSOLIDATION__RETRY_ATTEMPTS": "2"})
    set_agent(stack, "t1", "a1", "--provider", "MEMOS", "--open-long-memory", "on",
              "--model", "chat-model")
    body = {"code": 500, "message": LEAKY, "data": None}
    memos.fail_next(1000, 500, path="/product/add", body=body)
    memos.fail_next(1000, 500, path="/product/search", body=body)
    worker = stack.worker().start()
    await stack.produce([
        chat_event(0, "c1", content="I live in Oslo. MARKER diary entry one."),
        chat_event(1, "c1", content="Noted."),
        chat_event(2, "c1", content="My dog is called Rex. MARKER two."),
        session_end_event("c1"),
        chat_event(3, "c2", role="MARKER-role"),  # poison: not a role
        chat_event(4, "c3", content="x" * 200_000 + "MARKER"),  # poison: too large
    ])
    dead = await stack.read_topic(stack.topics["dlq"], expect=3, timeout=90)
    assert len(dead) >= 3
    assert run_status(stack, "t1/c1#1") != "done"

    out = subprocess.run(
        [sys.executable, "-m", "streams.cli", "query", "--tenant", "t1", "--user", "u1",
         "--agent", "a1", "--no-short-term", "--timeout", "30", "where do I live"],
        env={**os.environ, **stack.env()}, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    reply = json.loads(out.stdout)
    assert reply["warnings"], reply  # the provider's failure is reported ...
    _clean("the reply", out.stdout)  # ... without what it echoed
    _clean("the query command's output", out.stderr)

    retries = await stack.read_topic(stack.topics["retry"], timeout=10)
    for record in [*dead, *retries]:
        _clean("dead-letter and retry headers",
               json.dumps([(k, v.decode("utf-8", "replace")) for k, v in record.headers]))
    port = worker.env["MEMSTREAM_WEB__PORT"]
    metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    _clean("the metrics", "\n".join(line for line in metrics.splitlines()
                                    if not line.startswith("#")))
    await eventually(lambda: "Token ***" in worker.log_text(), 30, "the provider error logged")
    _clean("the worker log", worker.log_text())
