"""Consolidation benchmark: session ends consolidated per second, and model calls.

Two runs against the real MariaDB (and Redis) of ``make services``, each on a
fresh database, through the same pipeline and processor the worker runs
(``streams.consolidation``), fed from memory with no Kafka:

(a) rule judge, built-in provider: sessions consolidated per second, the
    worker's default batch size and concurrency; users come back in several
    sessions, so conflict searches find stored memories;
(b) a model configured (the fake OpenAI-compatible server of the tests, which
    answers the judge, conflict and summary prompts): model calls per 100
    messages, by purpose.

Ends by printing one JSON line.

    python bench/consolidation.py [--sessions 400] [--messages 12] [--model-sessions 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import re
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from sqlalchemy import text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streams.adapters.db.messages import MessageStore, message_row  # noqa: E402
from streams.memory.agent_configs import StaticAgentConfigs  # noqa: E402
from streams.settings import DatabaseSettings, LLMSettings, RedisSettings, Settings  # noqa: E402
from streams.wire.envelope import Outgoing, SourceRecord  # noqa: E402
from streams.wire.records import ChatMessage, SessionClosed  # noqa: E402
from streams.worker.runtime import Runtime  # noqa: E402
from streams.worker.wiring import Wiring  # noqa: E402
from tests.fakes import model_prompts as prompts  # noqa: E402
from tests.fakes.openai import FakeOpenAI  # noqa: E402
from tests.support.services import REDIS_PORT, drop_database, migrated_database  # noqa: E402

CITIES = ["Berlin", "Paris", "Lisbon", "Oslo", "Rome", "Madrid", "Vienna", "Prague", "Dublin",
          "Athens"]
JOBS = ["nurse", "teacher", "pilot", "chef", "lawyer", "plumber", "architect", "dentist"]
LIKES = ["jazz", "hiking", "chess", "tea", "sushi", "cycling", "opera", "gardening"]
SMALL_TALK = ["That sounds great.", "Thanks, that helps!", "Can you tell me more?",
              "Sure, here is what I found.", "Good morning!", "Let me check that for you."]


def user_line(rng: random.Random) -> str:
    return rng.choice([
        f"I live in {rng.choice(CITIES)}.", f"I work as a {rng.choice(JOBS)}.",
        f"I love {rng.choice(LIKES)}.", f"My sister is called {rng.choice(['Ana', 'Eva', 'Mia'])}.",
        f"Remember that my flat is number {rng.randint(1, 99)}.", rng.choice(SMALL_TALK),
    ])


def sessions(n: int, per_session: int, users: int, seed: int = 7
             ) -> list[tuple[SessionClosed, list[ChatMessage]]]:
    rng = random.Random(seed)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    out = []
    for s in range(n):
        user, conv = f"user-{s % users}", f"conv-{s}"
        msgs = []
        for i in range(per_session):
            role = "user" if i % 2 == 0 else "assistant"
            content = user_line(rng) if role == "user" else rng.choice(SMALL_TALK)
            msgs.append(ChatMessage(
                event_id=f"{conv}-{i}", type="message", tenant_id="bench", user_id=user,
                agent_id="agent-1", conversation_id=conv, role=role, content=content,
                created_at=t0 + timedelta(days=s, minutes=i)))
        closed_at = datetime.now(UTC) + timedelta(seconds=60)
        out.append((SessionClosed(
            closed_id=f"bench/{conv}#1", tenant_id="bench", user_id=user, agent_id="agent-1",
            conversation_id=conv, trigger="explicit", session_seq=1, closed_at=closed_at,
            last_activity=msgs[-1].created_at, message_count=per_session), msgs))
    return out


class Collect:
    def __init__(self) -> None:
        self.sent: list[Outgoing] = []

    async def publish(self, records: Sequence[Outgoing]) -> None:
        self.sent.extend(records)


async def consolidate(settings: Settings, data: list[tuple[SessionClosed, list[ChatMessage]]]
                      ) -> dict[str, Any]:
    runtime = await Runtime(settings, migrate=False).start()
    try:
        now = datetime.now(UTC)
        rows = [message_row(m, now) for _, msgs in data for m in msgs]
        store = MessageStore(runtime.engine)
        for i in range(0, len(rows), 1000):
            await store.store(rows[i:i + 1000])
        publisher = Collect()
        parts = Wiring(settings, runtime, publisher=publisher,
                       agent_configs=StaticAgentConfigs()).consolidation()
        records = [SourceRecord("memory.session-closed", 0, i, c.conversation_id.encode(),
                                c.model_dump_json().encode()) for i, (c, _) in enumerate(data)]
        batch = settings.consolidation.max_pending
        outcomes: Counter[str] = Counter()
        started = time.perf_counter()
        for i in range(0, len(records), batch):
            for handled in await parts.processor.process(records[i:i + batch]):
                outcomes[handled.outcome] += 1
        elapsed = time.perf_counter() - started
        async with runtime.engine.connect() as conn:
            stored = dict((await conn.execute(text(
                "SELECT kind, COUNT(*) FROM memory GROUP BY kind"))).all())
            expired = (await conn.execute(text(
                "SELECT COUNT(*) FROM memory WHERE valid_to IS NOT NULL"))).scalar_one()
        return {"elapsed_s": elapsed, "outcomes": dict(outcomes), "stored": stored,
                "expired": int(expired), "forwarded": len(publisher.sent)}
    finally:
        await runtime.stop()


def fake_model(purposes: Counter[str]) -> FakeOpenAI:
    """Answers like a careful model: user statements from [NEW] lines as memories,
    supersede when a stored memory names the same thing differently, short summaries."""

    def answer(body: dict[str, Any]) -> str:
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        if system.startswith(prompts.JUDGE):
            purposes["judge"] += 1
            return prompts.judged([(n, t) for n, t in prompts.new_user_lines(user)
                                   if re.match(r"I |My |Remember ", t)])
        if system.startswith(prompts.CONFLICT):
            purposes["conflict"] += 1
            return prompts.decided([(new.index, "supersede" if new.stored else "store",
                                     [i for i, _ in new.stored[:1]])
                                    for new in prompts.new_memories(user)])
        purposes["summary"] += 1
        return "The user shared facts about home, work and what they like."

    return FakeOpenAI(handler=answer)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    run = uuid.uuid4().hex[:6]
    redis = RedisSettings(url=SecretStr(f"redis://127.0.0.1:{REDIS_PORT}/1"), key_prefix=f"bc{run}")
    db_a, db_b = f"bench_consol_a_{run}", f"bench_consol_b_{run}"
    try:
        print(f"(a) rule judge: {args.sessions} sessions x {args.messages} messages ...",
              file=sys.stderr)
        url_a = await migrated_database(db_a)
        rules = Settings(database=DatabaseSettings(url=SecretStr(url_a)), redis=redis)
        a = await consolidate(rules, sessions(args.sessions, args.messages,
                                              args.users or max(1, args.sessions // 4)))
        print(f"(b) model: {args.model_sessions} sessions ...", file=sys.stderr)
        purposes: Counter[str] = Counter()
        with fake_model(purposes) as llm:
            url_b = await migrated_database(db_b)
            model = Settings(database=DatabaseSettings(url=SecretStr(url_b)), redis=redis,
                             llm=LLMSettings(base_url=llm.base_url, model="bench"))
            data = sessions(args.model_sessions, args.messages,
                            args.users or max(1, args.model_sessions // 4), seed=11)
            b = await consolidate(model, data)
    finally:
        drop_database(db_a)
        drop_database(db_b)
    messages = args.model_sessions * args.messages
    calls = sum(purposes.values())
    return {
        "sessions": args.sessions,
        "messages_per_session": args.messages,
        "rule_sessions_per_s": round(args.sessions / a["elapsed_s"], 1),
        "rule_ms_per_session": round(1000 * a["elapsed_s"] / args.sessions, 1),
        "rule_outcomes": a["outcomes"],
        "rule_memories": a["stored"],
        "rule_superseded": a["expired"],
        "model_sessions": args.model_sessions,
        "model_calls_per_100_messages": round(100 * calls / messages, 2),
        "judge_calls_per_session": round(purposes["judge"] / args.model_sessions, 2),
        "conflict_calls_per_session": round(purposes["conflict"] / args.model_sessions, 2),
        "summary_calls": purposes["summary"],
        "model_memories": b["stored"],
        "model_superseded": b["expired"],
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, Python {platform.python_version()}",
    }


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sessions", type=int, default=400)
    ap.add_argument("--messages", type=int, default=12, help="messages per session")
    ap.add_argument("--users", type=int, default=0,
                    help="distinct users (default: a quarter of the sessions, so each comes back)")
    ap.add_argument("--model-sessions", type=int, default=100)
    print(json.dumps(asyncio.run(main(ap.parse_args()))))
