"""The LoCoMo harness: conversations in through Kafka, questions through the query topic.

Each sample becomes one conversation (tenant ``locomo``, user = the sample id,
both speakers as ``user`` messages named after the speaker, ``created_at`` =
the session's date, event id ``<sample_id>:<dia_id>``), with a
``session_end`` after every session. Once every session is consolidated,
every question of categories 1–4 is asked through the query topic exactly as
an agent would, with a few requests in flight, and scored by evidence recall.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from streams.clock import aware_utc
from streams.devtools import harness_common
from streams.devtools.harness_common import (
    Arrivals,
    Progress,
    checked_query,
    memory_client,
    send_all,
)
from streams.devtools.locomo.dataset import Question, Sample
from streams.devtools.locomo.scoring import QuestionScore, event_id, score
from streams.settings import Settings
from streams.wire.query import MemoryReply

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


async def ask_all(settings: Settings, samples: Sequence[Sample], opts: HarnessOptions,
                  progress: Progress) -> list[QuestionScore]:
    questions = [q for s in samples for q in s.questions]
    async with memory_client(settings, opts.query_timeout_s) as client:

        async def ask(q: Question) -> MemoryReply:
            return await checked_query(
                client, tenant_id=opts.tenant, user_id=q.sample_id, agent_id=opts.agent,
                message=q.question, top_k=opts.top_k, include_short_term=False,
                long_memory_token_budget=opts.budget_tokens)

        timed = await send_all(questions, ask, Arrivals(in_flight=opts.in_flight), progress)
    unanswered = sum(1 for t in timed if t.result is None)
    if unanswered:
        raise RuntimeError(f"{unanswered} question(s) got no reply")
    return [score(q, [m.source_event_ids for m in t.result.memories],
                  t.result.budget.source_event_ids if t.result.budget else [], t.latency_ms)
            for q, t in zip(questions, timed, strict=True) if t.result is not None]


async def publish(settings: Settings, samples: Sequence[Sample], opts: HarnessOptions) -> int:
    """Publish every sample; the sessions to wait for (a session without turns closes
    nothing, so it is not consolidated)."""
    return await harness_common.publish(settings,
                                        [e for s in samples for e in chat_events(s, opts)])
