"""A replay in one burst makes the sessions and memories the live traffic made.

The live run publishes three groups of messages per conversation, each after
the previous session went idle (the wall-clock scan closes it); the replay
publishes the very same events (the same ``created_at``) at once into a fresh
deployment, where only the gaps in event time can tell the sessions apart."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.integration.conftest import Stack, chat_event, new_stack
from tests.integration.consolidation_support import FAST, contents
from tests.support.worker import eventually

GROUPS = {
    "c1": [("I live in Berlin.", "Lovely city."), ("Actually, I live in Paris now.", "Noted."),
           ("I work at Philips.", "Nice.")],
    "c2": [("My dog is called Rex.", "Sweet."), ("I like green tea.", "Good choice."),
           ("My sister is called Ana.", "Nice name.")],
}


def group(conv: str, g: int, start: datetime) -> list[dict[str, Any]]:
    """Four messages of group ``g`` of ``conv``, 0.2 s apart in event time."""
    out = []
    for n in range(4):
        i = 4 * g + n
        content = GROUPS[conv][g][n % 2] if n < 2 else f"{conv} small talk {i}"
        at = (start + timedelta(seconds=0.2 * n)).isoformat().replace("+00:00", "Z")
        out.append(chat_event(i, conv, content=content, created_at=at))
    return out


def sessions(stack: Stack) -> list[tuple[str, ...]]:
    rows = stack.sql("SELECT conversation_id, session_seq, event_id FROM conversation_message "
                     "ORDER BY conversation_id, session_seq, event_id")
    return [tuple(r) for r in rows]


def runs(stack: Stack) -> list[str]:
    return [r[0] for r in stack.sql(
        "SELECT closed_id FROM consolidation_run WHERE status = 'done' ORDER BY closed_id")]


async def test_a_burst_replay_makes_the_sessions_and_memories_of_the_live_run(
        tmp_path: Path) -> None:
    published: list[dict[str, Any]] = []
    with new_stack(tmp_path / "live") as live:
        live.extra_env.update(FAST)  # a session is idle after 3 s
        live.worker().start()
        for g in range(3):
            docs = [d for conv in GROUPS for d in group(conv, g, datetime.now(UTC))]
            published += docs
            await live.produce(docs)
            want = {f"t1/{conv}#{g + 1}" for conv in GROUPS}
            await eventually(lambda w=want: w <= set(runs(live)), 90,  # type: ignore[misc]
                             f"the live sessions of group {g} consolidated")
            await asyncio.sleep(0.5)
        live_sessions, live_runs = sessions(live), runs(live)
        live_facts = contents(live)
    with new_stack(tmp_path / "replay") as replay:
        replay.extra_env.update(FAST)
        replay.worker().start()
        await replay.produce(published)  # one burst, the same events
        await eventually(lambda: len(runs(replay)) >= len(live_runs), 90,
                         "the replayed sessions consolidated")
        await asyncio.sleep(1.0)  # nothing more comes
        assert sessions(replay) == live_sessions
        assert runs(replay) == live_runs == sorted(
            f"t1/{conv}#{g}" for conv in GROUPS for g in (1, 2, 3))
        assert contents(replay) == live_facts
    print("\nlive and replay sessions:", live_runs)
    print("valid facts (both runs):", live_facts)
    assert "I live in Paris now." in live_facts and "I live in Berlin." not in live_facts


async def test_a_replayed_day_old_conversation_with_no_gap_stays_one_session(
        tmp_path: Path) -> None:
    with new_stack(tmp_path) as s:
        s.extra_env.update(FAST)
        s.worker().start()
        t0 = datetime.now(UTC) - timedelta(days=1)
        await s.produce([chat_event(i, "c3", created_at=(t0 + timedelta(seconds=2 * i))
                                    .isoformat().replace("+00:00", "Z")) for i in range(6)])
        await eventually(lambda: runs(s) == ["t1/c3#1"], 60, "one idle close")
        assert {r[1] for r in sessions(s)} == {"1"}
