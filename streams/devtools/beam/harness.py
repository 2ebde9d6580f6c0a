"""The BEAM harness: chats in through Kafka, questions through the query topic.

Each chat is fed as the platform of a person talking with an assistant would
feed it: tenant ``beam``, one conversation and one user ``beam-<chat_id>``,
one agent ``beam-agent`` shared by every chat, every turn a message with its
own role (``user`` or ``assistant``, no name), event id
``beam-<chat_id>:<turn id>``, ``created_at`` the session's start plus one
second per turn, and a ``session_end`` after every session that has turns.
Once those sessions are consolidated, every question (abstention ones too:
they are timed and count in the cross-user check, not scored) is asked
through the query topic from a conversation of its own,
``beam-<chat_id>-q<n>``, so no Session window holds the chat, in closed loop
(``in_flight`` at once) or open loop (``rate`` requests per second).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from streams.clock import aware_utc
from streams.devtools import harness_common
from streams.devtools.beam.dataset import Chat, Question
from streams.devtools.beam.scoring import Asked, Memory, Reply, event_id
from streams.devtools.harness_common import (
    Arrivals,
    Progress,
    checked_query,
    memory_client,
    send_all,
)
from streams.settings import Settings
from streams.wire.query import MemoryReply


@dataclass(frozen=True)
class HarnessOptions:
    tenant: str = "beam"
    agent: str = "beam-agent"
    top_k: int = 50
    budget_tokens: int = 4000
    arrivals: Arrivals = field(default_factory=Arrivals)
    consolidation_timeout_s: float = 3600.0
    query_timeout_s: float = 30.0


def conversation_id(chat: Chat) -> str:
    return f"beam-{chat.chat_id}"


def user_id(chat_id: str) -> str:
    return f"beam-{chat_id}"


def question_conversation(chat_id: str, number: int) -> str:
    """The conversation question ``number`` (1-based) of a chat is asked from."""
    return f"beam-{chat_id}-q{number}"


def chat_events(chat: Chat, opts: HarnessOptions) -> list[dict[str, Any]]:
    """The chat as chat events: its turns, and a session end after each session with turns."""
    events: list[dict[str, Any]] = []
    base = {"tenant_id": opts.tenant, "user_id": user_id(chat.chat_id), "agent_id": opts.agent,
            "conversation_id": conversation_id(chat)}
    for session in chat.sessions:
        if not session.turns:
            continue
        start = aware_utc(session.start)
        for seq, turn in enumerate(session.turns):
            events.append({**base, "event_id": event_id(chat.chat_id, turn.id),
                           "type": "message", "role": turn.role,
                           "content": turn.content or "(no text)",
                           "created_at": (start + timedelta(seconds=seq)).isoformat()})
        events.append({**base, "event_id": f"beam-{chat.chat_id}:session-{session.number}:end",
                       "type": "session_end",
                       "created_at": (start + timedelta(seconds=len(session.turns))).isoformat()})
    return events


async def publish(settings: Settings, chats: Sequence[Chat], opts: HarnessOptions) -> int:
    """Publish every chat; the sessions to wait for."""
    return await harness_common.publish(settings,
                                        [e for c in chats for e in chat_events(c, opts)])


def as_reply(reply: MemoryReply) -> Reply:
    return Reply(
        memories=tuple(Memory(m.id, m.cube, m.content, tuple(m.source_event_ids))
                       for m in reply.memories),
        budget_ids=tuple(reply.budget.memory_ids) if reply.budget else (),
        budget_sources=tuple(reply.budget.source_event_ids) if reply.budget else (),
        tokens_used=reply.budget.tokens_used if reply.budget else 0)


async def ask_all(settings: Settings, chats: Sequence[Chat], opts: HarnessOptions,
                  progress: Progress) -> list[Asked]:
    questions = [(n, q) for c in chats for n, q in enumerate(c.questions, 1)]
    async with memory_client(settings, opts.query_timeout_s) as client:

        async def ask(item: tuple[int, Question]) -> Reply:
            n, q = item
            reply = await checked_query(
                client, tenant_id=opts.tenant, user_id=user_id(q.chat_id), agent_id=opts.agent,
                conversation_id=question_conversation(q.chat_id, n), message=q.question,
                top_k=opts.top_k, include_short_term=False,
                long_memory_token_budget=opts.budget_tokens)
            return as_reply(reply)

        timed = await send_all(questions, ask, opts.arrivals, progress)
    return [Asked(q, t.result, t.latency_ms, n)
            for (n, q), t in zip(questions, timed, strict=True)]
