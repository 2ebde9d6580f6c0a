"""Tables of the consolidation pipeline (SQLAlchemy Core, MySQL and SQLite).

They make a session end crash-safe and idempotent; see
:mod:`streams.consolidation` for how they are used:

``consolidation_ledger``
    one row per processed message, by content hash: which closing event
    (``closed_id``) claimed it and when. Written before the judge runs.
``consolidation_progress``
    per conversation, the highest session whose messages were claimed (and,
    for messages stored before sessions were stamped, the newest message id
    below which every message has been claimed). The ledger's rows expire;
    these marks do not, so messages whose hashes were purged are never taken
    for new again.
``consolidation_run``
    one row per closing event, or per part of a session consolidated in
    bounded parts: its provider, whether long memory applies, how far it got
    (``claimed`` -> ``judged`` -> ``done``), and where its claim stopped.
``consolidation_candidate``
    the judged candidates of a run, persisted before anything is written, then
    each one's conflict decision, its write intent, the id the provider gave
    it, and whether the memories it supersedes were expired.
``pending_expiry``
    expiries that failed after the new memory was written; a periodic task
    retries them.
``memory_origin``
    every memory consolidation wrote, by provider id: the cube and user it was
    written for, the conversation and closing event it came from, the event
    time of what it was judged from, and when it was retired. Kept after the
    run's own rows are purged, so ``memstream reprocess`` knows which memories a
    rebuilt session replaces, whichever provider holds them.

Times are naive UTC, as in :mod:`streams.adapters.db.schema.conversation`. Identity columns compare
byte for byte on MySQL (tenant ``A`` is not tenant ``a``).
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    String,
    Table,
    Text,
)

from streams.adapters.db.schema.conversation import BinaryKey, LongText, Timestamp, metadata

CLOSED_ID_LEN = 400  # "{tenant}/{conversation}#{seq}": 64 + 1 + 255 + 1 + digits
ClosedId = BinaryKey(CLOSED_ID_LEN)

consolidation_ledger = Table(
    "consolidation_ledger",
    metadata,
    Column("tenant_id", BinaryKey(64), primary_key=True),
    Column("message_hash", String(64), primary_key=True),
    Column("conversation_id", BinaryKey(255), nullable=False),
    Column("event_id", BinaryKey(128), nullable=False),
    Column("message_id", BigInteger, nullable=False),
    Column("closed_id", ClosedId, nullable=False),
    Column("claimed_at", Timestamp, nullable=False),
    Index(None, "closed_id"),
    Index(None, "claimed_at"),
    Index(None, "tenant_id", "conversation_id", "message_id"),
)

consolidation_progress = Table(
    "consolidation_progress",
    metadata,
    Column("tenant_id", BinaryKey(64), primary_key=True),
    Column("conversation_id", BinaryKey(255), primary_key=True),
    Column("claimed_until_id", BigInteger, nullable=False),
    Column("claimed_session_seq", Integer, nullable=False, server_default="0"),
    Column("updated_at", Timestamp, nullable=False),
)

consolidation_run = Table(
    "consolidation_run",
    metadata,
    Column("closed_id", ClosedId, primary_key=True),
    Column("tenant_id", BinaryKey(64), nullable=False),
    Column("conversation_id", BinaryKey(255), nullable=False),
    Column("user_id", BinaryKey(255), nullable=False),
    Column("agent_id", BinaryKey(255), nullable=False),
    Column("provider", String(16), nullable=False),
    Column("long_memory", Boolean, nullable=False),
    Column("status", String(16), nullable=False),
    Column("judge", String(16)),
    Column("message_count", Integer, nullable=False),
    Column("candidate_count", Integer, nullable=False),
    # a session consolidated in parts: the last message this part's claim went
    # through, and whether the session has messages after it (a next part)
    Column("claimed_until_id", BigInteger),
    Column("has_more", Boolean, nullable=False, server_default="0"),
    Column("last_error", Text),
    Column("created_at", Timestamp, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
    Column("finished_at", Timestamp),
    Index(None, "status", "updated_at"),
    Index(None, "tenant_id", "user_id"),  # an erasure's runs (0014)
    Index(None, "tenant_id", "conversation_id"),
)

consolidation_candidate = Table(
    "consolidation_candidate",
    metadata,
    Column("closed_id", ClosedId, primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("cand_hash", String(64), nullable=False),
    Column("cube", BinaryKey(255), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("type", String(16), nullable=False),
    Column("scope", String(8), nullable=False),
    Column("importance", Float, nullable=False),
    Column("content", LongText, nullable=False),
    Column("source_event_ids", Text, nullable=False),
    Column("event_time", Timestamp),
    Column("action", String(16)),
    Column("expire_ids", Text),
    Column("decider", String(16)),
    Column("reason", Text),
    Column("write_started_at", Timestamp),
    Column("memory_id", String(255)),
    Column("written_at", Timestamp),
    Column("expired_at", Timestamp),
    Column("user_id", BinaryKey(255)),
    Column("role", String(16)),
    Column("span_start", Integer),
    Column("span_end", Integer),
    Column("masked", String(128)),  # kinds of sensitive content masked in it (0020)
    Index(None, "user_id"),  # an erasure's candidates (0014)
    Index(None, "memory_id"),
)

pending_expiry = Table(
    "pending_expiry",
    metadata,
    Column("closed_id", ClosedId, primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("tenant_id", BinaryKey(64), nullable=False),
    Column("user_id", BinaryKey(255), nullable=False),
    Column("agent_id", BinaryKey(255), nullable=False),
    Column("provider", String(16), nullable=False),
    Column("cube", BinaryKey(255), nullable=False),
    Column("memory_ids", Text, nullable=False),
    Column("superseded_by", String(255), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("next_attempt_at", Timestamp, nullable=False),
    Column("last_error", Text),
    Column("created_at", Timestamp, nullable=False),
    Index(None, "next_attempt_at"),
    Index(None, "tenant_id", "user_id"),  # an erasure's (0014)
)

memory_origin = Table(
    "memory_origin",
    metadata,
    Column("tenant_id", BinaryKey(64), primary_key=True),
    Column("provider", String(16), primary_key=True),
    Column("memory_id", BinaryKey(255), primary_key=True),
    Column("cube", BinaryKey(255), nullable=False),
    Column("user_id", BinaryKey(255), nullable=False),
    Column("agent_id", BinaryKey(255), nullable=False),
    Column("conversation_id", BinaryKey(255), nullable=False),
    Column("closed_id", ClosedId, nullable=False),
    Column("event_time", Timestamp, nullable=False),
    Column("written_at", Timestamp, nullable=False),
    Column("retired_at", Timestamp),
    Index(None, "tenant_id", "conversation_id", "event_time"),
    Index(None, "closed_id"),
    Index(None, "tenant_id", "user_id"),  # an erasure's memories (0014)
    Index(None, "tenant_id", "memory_id"),
)
