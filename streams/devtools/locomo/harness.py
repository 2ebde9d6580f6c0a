"""The LoCoMo harness: conversations in through Kafka, questions through the query topic.

Each sample becomes one conversation (tenant ``locomo``, user = the sample id,
both speakers as ``user`` messages named after the speaker, ``created_at`` =
the session's date, event id ``<sample_id>:<dia_id>``), with a
``session_end`` after every session. Once every session is consolidated,
every question of categories 1–4 is asked through the query topic exactly as
an agent would, with a few requests in flight, and scored by evidence recall.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select

from streams.adapters.db.engine import create_engine
from streams.adapters.db.schema.consolidation import consolidation_run
from streams.adapters.kafka.clients import kafka_security, publish_events
from streams.client import MemoryClient
from streams.clock import aware_utc
from streams.devtools.locomo.dataset import Sample
from streams.devtools.locomo.scoring import QuestionScore, event_id, score
from streams.settings import Settings

UNDATED_START = datetime(2023, 1, 1)  # session n of a sample without dates: n days after it


@dataclass(frozen=True)
class HarnessOptions:
    tenant: str = "locomo"
    agent: str = "locomo-agent"
    top_k: int = 20
    budget_tokens: int = 4000
    in_flight: int = 4
    consolidation_timeout_s: float = 900.0
    query_timeout_s: float = 30.0


def conversation_id(sample: Sample) -> str:
    return f"locomo-{sample.sample_id}"


def chat_events(sample: Sample, opts: HarnessOptions) -> list[dict[str, Any]]:
    """The sample as chat events: its turns, and a session end after each session."""
    events: list[dict[str, Any]] = []
    conv = conversation_id(sample)
    base = {"tenant_id": opts.tenant, "user_id": sample.sample_id, "agent_id": opts.agent,
            "conversation_id": conv}
    for session in sample.sessions:
        start = aware_utc(session.when or UNDATED_START + timedelta(days=session.number))
        for seq, turn in enumerate(session.turns):
            events.append({**base, "event_id": event_id(sample.sample_id, turn.dia_id),
                           "type": "message", "role": "user", "name": turn.speaker,
                           "content": turn.text or "(no text)",
                           "created_at": (start + timedelta(seconds=seq)).isoformat()})
        events.append({**base, "event_id": f"{sample.sample_id}:{session.key}:end",
                       "type": "session_end",
                       "created_at": (start + timedelta(seconds=len(session.turns))).isoformat()})
    return events


async def consolidated_sessions(settings: Settings, tenant: str) -> int:
    engine = create_engine(settings.database)
    try:
        async with engine.connect() as conn:
            q = select(func.count()).select_from(consolidation_run).where(
                consolidation_run.c.tenant_id == tenant, consolidation_run.c.status == "done")
            return int((await conn.execute(q)).scalar_one())
    except Exception:  # the schema may not exist yet
        return 0
    finally:
        await engine.dispose()


async def wait_for_consolidation(settings: Settings, opts: HarnessOptions, expected: int,
                                 progress: Callable[[str], None],
                                 alive: Callable[[], bool] = lambda: True) -> None:
    deadline = time.monotonic() + opts.consolidation_timeout_s
    last = -1
    while time.monotonic() < deadline:
        done = await consolidated_sessions(settings, opts.tenant)
        if done != last:
            progress(f"consolidated {done}/{expected} sessions")
            last = done
        if done >= expected:
            return
        if not alive():
            raise RuntimeError("the worker stopped")
        await asyncio.sleep(1.0)
    raise TimeoutError(f"only {last} of {expected} sessions consolidated in time")


async def ask_all(settings: Settings, samples: Sequence[Sample], opts: HarnessOptions,
                  progress: Callable[[str], None]) -> list[QuestionScore]:
    questions = [q for s in samples for q in s.questions]
    results: list[QuestionScore] = []
    sem = asyncio.Semaphore(opts.in_flight)
    async with MemoryClient(settings.kafka.broker, request_topic=settings.kafka.queries_topic,
                            reply_topic=settings.query.reply_topic,
                            timeout_s=opts.query_timeout_s,
                            security=kafka_security(settings.kafka)) as client:

        async def one(q: Any) -> None:
            async with sem:
                start = time.perf_counter()
                reply = await client.query(
                    tenant_id=opts.tenant, user_id=q.sample_id, agent_id=opts.agent,
                    message=q.question, top_k=opts.top_k, include_short_term=False,
                    long_memory_token_budget=opts.budget_tokens)
                elapsed = (time.perf_counter() - start) * 1000
            if reply.error is not None:
                raise RuntimeError(f"query failed: {reply.error.code}: {reply.error.message}")
            budget = reply.budget.source_event_ids if reply.budget else []
            results.append(score(q, [m.source_event_ids for m in reply.memories], budget, elapsed))
            if len(results) % 50 == 0 or len(results) == len(questions):
                progress(f"asked {len(results)}/{len(questions)} questions")

        await asyncio.gather(*(one(q) for q in questions))
    return results


async def publish(settings: Settings, samples: Sequence[Sample], opts: HarnessOptions) -> int:
    events = [e for s in samples for e in chat_events(s, opts)]
    await publish_events(settings.kafka, events)
    # a session without turns closes nothing, so it is not consolidated
    return sum(1 for s in samples for session in s.sessions if session.turns)


def stderr_progress(msg: str) -> None:
    print(f"  {msg}", file=sys.stderr, flush=True)
