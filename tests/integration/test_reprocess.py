"""``memstream reprocess`` against a real worker's MariaDB, with the built-in provider.

A worker consolidates conversations live (a group chat among them, whose facts
belong to whoever said them); then the judge's settings change and the stored
history is reprocessed: the new memories are written, the old ones retired, a
SIGKILL in the middle is resumed, a repeat changes nothing, a dry run writes
nothing."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

from streams.adapters.db.cube_lock import NamedCubeLocks
from streams.consolidation.reprocess import JOB_LOCK
from streams.memory.model import CubeKey
from tests.integration.conftest import Stack, chat_event, new_stack, session_end_event
from tests.integration.consolidation_support import FAST, memories, memstream
from tests.support.worker import MEMSTREAM, ROOT, eventually

CONVERSATIONS = 24
LONG = ("I keep a small vegetable garden behind the house and grow tomatoes, beans and "
        "far too many courgettes every summer")


def publish_plan() -> list[dict[str, object]]:
    docs: list[dict[str, object]] = [
        chat_event(0, "group", user_id="alice", content="I live in Berlin."),
        chat_event(1, "group", user_id="bob", content="Nice, I love sailing."),
        chat_event(2, "group", user_id="bob", content="I love sailing on the lakes."),
        session_end_event("group", user_id="ops-closer")]
    for c in range(CONVERSATIONS):
        conv = f"c{c:02d}"
        docs += [chat_event(0, conv, user_id=f"u{c}", content=f"{LONG} ({conv})."),
                 chat_event(1, conv, user_id=f"u{c}", content="That sounds like a lot."),
                 session_end_event(conv, user_id=f"u{c}")]
    return docs


def valid(stack: Stack, kind: str) -> list[tuple[str, str]]:
    return sorted((r[1], r[4]) for r in memories(stack) if r[3] == kind and r[5] == "valid")


def reprocess(stack: Stack, *args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    out = memstream(stack, "reprocess", "--tenant", "t1", *args, env=env)
    doc: dict[str, object] = json.loads(out.stdout)
    return doc


def kill_midway(stack: Stack, env: dict[str, str]) -> None:
    """Start a reprocess and SIGKILL it once some but not all sessions are done."""
    proc = subprocess.Popen([*MEMSTREAM, "reprocess", "--tenant", "t1"], cwd=ROOT,
                            env={**os.environ, **stack.env(), **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    seen = b""
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            chunk = os.read(proc.stderr.fileno(), 256)
            if not chunk:
                raise AssertionError(f"reprocess ended before it was killed: {seen[-500:]!r}")
            seen += chunk
            done = [int(d) for d, t in re.findall(rb"\] (\d+)/(\d+)", seen)
                    if 0 < int(d) < int(t)]
            if done and done[-1] >= 3:
                proc.send_signal(signal.SIGKILL)
                break
        else:
            raise AssertionError("no progress seen")
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


async def test_reprocess_rebuilds_from_the_history_and_resumes_after_sigkill(
        tmp_path: Path) -> None:
    with new_stack(tmp_path) as s:
        s.extra_env.update(FAST)
        s.worker().start()
        await s.produce(publish_plan())
        await eventually(lambda: int(s.sql("SELECT COUNT(*) FROM consolidation_run WHERE "
                                           "status = 'done'")[0][0]) == CONVERSATIONS + 1,
                         90, "every session consolidated live")

        # every fact belongs to whoever said it, not to the session's closer
        facts = valid(s, "fact")
        assert ("alice", "I live in Berlin.") in facts
        assert ("bob", "I love sailing on the lakes.") in facts
        assert not any(user == "ops-closer" for user, _ in facts)
        live_episodes = valid(s, "episode")
        assert len(live_episodes) == 3 + 2 * CONVERSATIONS

        # a dry run: the plan, what it replaces, what the judge makes of it now
        before = memories(s)
        plan = reprocess(s, "--dry-run")
        assert (plan["sessions"], plan["conversations"]) == (CONVERSATIONS + 1,
                                                              CONVERSATIONS + 1)
        assert plan["held"] == len(facts) + len(live_episodes)
        assert {c["content"] for c in plan["candidates"]  # type: ignore[attr-defined]
                if c["kind"] == "fact"} == {f for _, f in facts}
        assert memories(s) == before
        assert s.sql("SELECT COUNT(*) FROM reprocess_job")[0][0] == "0"

        # the same judge again: the built-in provider keeps every memory's id
        same = reprocess(s, "--quiet")
        assert (same["sessions"], same["written"], same["retired"], same["resumed"]) == (
            CONVERSATIONS + 1, 0, 0, False)
        assert same["kept"] == len(facts) + len(live_episodes)
        assert memories(s) == before

        # the judge changes (episodes cut shorter): killed midway, then resumed
        shorter = {"MEMSTREAM_CONSOLIDATION__EPISODE_MAX_CHARS": "60"}
        kill_midway(s, shorter)
        # nothing retired before every session was rebuilt: the old episodes still answer
        held = {e for _, e in valid(s, "episode")}
        assert {e for _, e in live_episodes} <= held
        # another request waits for the unfinished one, saying how to go on
        other = memstream(s, "reprocess", "--tenant", "t1", "--user", "u0", env=shorter,
                          check=False)
        assert other.returncode == 1
        assert "is unfinished" in other.stderr and "--abandon" in other.stderr
        out = memstream(s, "reprocess", "--tenant", "t1", env=shorter)
        assert "resuming job" in out.stderr and "reprocess [" in out.stderr
        report = json.loads(out.stdout)
        assert report["resumed"] is True and report["sessions"] == CONVERSATIONS + 1
        episodes = valid(s, "episode")
        long_ones = [(u, e) for u, e in episodes if e.startswith("User: I keep")]
        assert len(long_ones) == CONVERSATIONS == len({u for u, _ in long_ones})
        assert all(len(e) <= 60 for _, e in long_ones)
        assert not any(e.startswith("User: I keep") and len(e) > 60
                       for _, e in valid(s, "episode"))
        assert valid(s, "fact") == facts  # the facts are rebuilt as they were
        assert report["retired"] == CONVERSATIONS  # the old long episodes
        # repeating the request changes nothing
        repeat = reprocess(s, "--quiet", env=shorter)
        assert (repeat["written"], repeat["retired"]) == (0, 0)
        assert valid(s, "episode") == episodes
        # and going back to the judge as it was brings the long episodes back, valid
        back = reprocess(s, "--quiet")
        assert back["retired"] == CONVERSATIONS and back["written"] == CONVERSATIONS
        assert valid(s, "episode") == live_episodes
        assert valid(s, "fact") == facts
        # while another process runs the tenant's job, a second one stops at once
        engine = s.engine()
        try:
            async with NamedCubeLocks(timeout_s=5, engine=engine).hold(CubeKey("t1", JOB_LOCK, "")):
                busy = memstream(s, "reprocess", "--tenant", "t1", "--quiet", check=False)
        finally:
            await engine.dispose()
        assert busy.returncode == 1 and "another process is running job" in busy.stderr
        assert reprocess(s, "--quiet")["resumed"] is True
        print("\nreprocess report after the SIGKILL:", report)
        print("reprocess report, the judge as it was:", back)
