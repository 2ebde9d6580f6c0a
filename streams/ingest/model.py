"""The ingest stage's nouns: its settings, what one batch came to, an event
taken in for storing, and the message as the store keeps it (a row) and as the
cache and the Session window carry it (a :data:`~streams.session.model.MessageDoc`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from streams.clock import naive_utc
from streams.session.model import MessageDoc
from streams.session.rules.batch import BareEnd
from streams.wire.envelope import SourceRecord
from streams.wire.records import ChatMessage, IdleCheck, SessionClosed, SessionEnd

# A stored message: the columns of the message table, by name.
MessageRow = dict[str, Any]
EventKey = tuple[str, str]  # (tenant_id, event_id): what a message is stored once under


@dataclass(frozen=True)
class IngestConfig:
    chat_topic: str
    subagent_topic: str
    dlq_topic: str
    session_closed_topic: str
    max_content_bytes: int = 65_536
    retry_initial_s: float = 0.2
    retry_max_s: float = 10.0
    idle_topic: str | None = None
    idle_timeout_s: float = 1800.0
    closed_retention_s: float = 7 * 86400.0
    session_grace_s: float = 300.0
    max_future_s: float = 86400.0
    session_max_messages: int = 2000  # a session this long is closed at ingest
    session_max_bytes: int = 4 * 1024 * 1024  # ... and one with this much text


@dataclass
class IngestResult:
    stored: int = 0
    duplicates: int = 0
    dead_lettered: int = 0
    rerouted: int = 0
    dropped: int = 0
    erased: int = 0
    closed: list[SessionClosed] = field(default_factory=list)
    cache_ok: bool = True


@dataclass
class Taken:
    """An event of the batch that reaches the session rules (and, a message, the
    store): where it was read, and for sub-agent chat stored in its parent
    conversation, the sub-agent conversation it came from. A session end of an
    erased user is a :class:`~streams.session.rules.batch.BareEnd`."""

    record: SourceRecord
    event: ChatMessage | SessionEnd | IdleCheck | BareEnd
    origin: str | None = None


@dataclass
class Tally:
    """Per-batch event counts by (topic, outcome), added to the metrics once per batch."""

    counts: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))

    def add(self, topic: str, outcome: str) -> None:
        self.counts[(topic, outcome)] += 1


@dataclass(frozen=True, slots=True)
class RefusedRow:
    """A row the store refused for good: its place in the batch, the class of the
    error and a description free of row contents (what its dead letter says)."""

    index: int
    error_class: str
    detail: str


@dataclass
class StoredRows:
    """What writing a batch of rows came to: the keys that were new, the rows refused."""

    stored: set[EventKey] = field(default_factory=set)
    refused: list[RefusedRow] = field(default_factory=list)


def message_row(
    msg: ChatMessage, now: datetime, origin_conversation_id: str | None = None,
    session_seq: int | None = None,
) -> MessageRow:
    """The row ``msg`` is stored as, taken in at ``now``, stamped with its session."""
    return {
        "tenant_id": msg.tenant_id,
        "event_id": msg.event_id,
        "conversation_id": msg.conversation_id,
        "user_id": msg.user_id,
        "agent_id": msg.agent_id,
        "role": msg.role,
        "name": msg.name,
        "content": msg.content,
        "tool_calls": msg.tool_calls_json(),
        "tool_call_id": msg.tool_call_id,
        "origin_conversation_id": origin_conversation_id,
        "created_at": naive_utc(msg.created_at),
        "ingested_at": naive_utc(now),
        "session_seq": session_seq,
    }


def _utc_text(ts: datetime) -> str:
    """RFC 3339 in UTC with ``Z``, for naive UTC (as stored) and aware times alike."""
    return naive_utc(ts).isoformat() + "Z"


def row_to_doc(row: Mapping[str, Any]) -> MessageDoc:
    """The message as the cache and the Session window carry it."""
    doc: MessageDoc = {
        "event_id": row["event_id"],
        "user_id": row["user_id"],
        "role": row["role"],
        "content": row["content"],
        "created_at": _utc_text(row["created_at"]),
    }
    if row.get("name"):
        doc["name"] = row["name"]
    if row.get("tool_calls"):
        doc["tool_calls"] = json.loads(row["tool_calls"])
    if row.get("tool_call_id"):
        doc["tool_call_id"] = row["tool_call_id"]
    if row.get("origin_conversation_id"):
        doc["origin_conversation_id"] = row["origin_conversation_id"]
    return doc
