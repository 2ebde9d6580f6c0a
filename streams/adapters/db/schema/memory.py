"""Tables of the built-in long-term memory provider (SQLAlchemy Core).

A *memory scope* is one searchable collection: the ``user_profile`` cube of
one user (``owner_id`` = the user id) or the ``agent_{id}`` cube of one agent,
shared by all its users (``owner_id`` = ``""``; the cube name carries the
agent). ``memory_scope_stats`` gives each scope a numeric id, the counts BM25
needs (valid documents, their total length) and a version bumped by every
write and expiry, which tells a worker when its cached vectors are stale.

``memory_term`` is the inverted index: one posting per (scope, term, memory)
with the term frequency and the document length, so a query reads only the
postings of its own terms (a primary-key range scan per term), never the
scope's other rows. Expired memories keep their ``memory`` row (``valid_to``
and ``superseded_by`` set, history stays auditable) but lose their postings
and vectors, so searches never see them.

On MySQL the identity columns compare byte for byte (``utf8mb4_bin``): tenant
``A`` and tenant ``a`` are different tenants, and ``café`` is not ``cafe``.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from streams.adapters.db.schema.conversation import BigId, BinaryKey, LongText, Timestamp, metadata
from streams.memory.model import MemoryCandidate

TERM_MAX_CHARS = 64
MASKED_MAX_CHARS = 128


memory_scope_stats = Table(
    "memory_scope_stats",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("tenant_id", BinaryKey(64), nullable=False),
    Column("cube", BinaryKey(255), nullable=False),
    Column("owner_id", BinaryKey(255), nullable=False),
    Column("doc_count", BigInteger, nullable=False, default=0),
    Column("total_len", BigInteger, nullable=False, default=0),
    Column("version", BigInteger, nullable=False, default=0),
    Column("updated_at", Timestamp, nullable=False),
    UniqueConstraint("tenant_id", "cube", "owner_id"),
    mysql_charset="utf8mb4",
)

memory = Table(
    "memory",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("scope_id", BigInteger, nullable=False),
    Column("tenant_id", BinaryKey(64), nullable=False),
    Column("user_id", BinaryKey(255), nullable=False),
    Column("agent_id", BinaryKey(255), nullable=False),
    Column("cube", BinaryKey(255), nullable=False),
    Column("type", String(16), nullable=False),
    Column("scope", String(8), nullable=False),
    Column("kind", String(8), nullable=False),
    Column("importance", Float, nullable=False),
    Column("content", LongText, nullable=False),
    Column("source_event_ids", Text, nullable=False),
    Column("session_key", String(255)),
    Column("seq", Integer, nullable=False, default=0),
    Column("doc_len", Integer, nullable=False),
    Column("content_hash", String(64), nullable=False),
    Column("event_time", Timestamp),
    Column("valid_from", Timestamp, nullable=False),
    Column("valid_to", Timestamp),
    Column("superseded_by", String(64)),
    Column("created_at", Timestamp, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
    Column("role", String(16)),  # an episode's message role
    Column("span_start", Integer),  # a passage's offsets in its message's content
    Column("span_end", Integer),
    Column("masked", String(MASKED_MAX_CHARS)),  # kinds masked in it, comma-separated (0020)
    Column("features", LongText),  # what holding it derives from its text (0022, row_features)
    UniqueConstraint("scope_id", "content_hash"),
    Index(None, "scope_id", "session_key", "seq"),
    Index(None, "tenant_id", "user_id", "cube"),  # an erasure of a user's memories (0014)
    Index(None, "scope_id", "kind", "valid_to"),  # a search of some kinds, not held (0021)
    mysql_charset="utf8mb4",
)

# a memory's columns as a reader is shown it: all but what only holding it needs
SHOWN_COLUMNS = tuple(c for c in memory.c if c.key != "features")

memory_term = Table(
    "memory_term",
    metadata,
    Column("scope_id", BigInteger, primary_key=True),
    Column("term", BinaryKey(TERM_MAX_CHARS), primary_key=True),
    Column("memory_id", BigInteger, primary_key=True),
    Column("tf", Integer, nullable=False),
    Column("doc_len", Integer, nullable=False),
    Index(None, "memory_id"),
    mysql_charset="utf8mb4",
)

memory_embedding = Table(
    "memory_embedding",
    metadata,
    Column("scope_id", BigInteger, primary_key=True),
    Column("model", String(128), primary_key=True),
    Column("memory_id", BigInteger, primary_key=True),
    Column("dim", Integer, nullable=False),
    Column("vector", LargeBinary, nullable=False),
    Index(None, "memory_id"),  # an erasure deletes vectors by memory (0014)
    mysql_charset="utf8mb4",
)


def role_and_span(c: MemoryCandidate) -> dict[str, Any]:
    """The ``role``, ``span_start`` and ``span_end`` columns of a memory's or a candidate's
    row (``memory`` and ``consolidation_candidate`` both have them)."""
    return {"role": c.role, "span_start": c.span[0] if c.span else None,
            "span_end": c.span[1] if c.span else None}


def masked_column(c: MemoryCandidate) -> dict[str, Any]:
    """The ``masked`` column of a memory's or a candidate's row: the kinds of sensitive
    content masked in it, comma-separated (NULL: none)."""
    return {"masked": ",".join(c.masked)[:MASKED_MAX_CHARS] or None}


def masked_of(r: Any) -> tuple[str, ...]:
    """A row's masked kinds (empty: none, or a row from before 0020)."""
    value = getattr(r, "masked", None)
    return tuple(value.split(",")) if isinstance(value, str) and value else ()


def span_of(r: Any) -> tuple[int, int] | None:
    """A row's passage span (None: a whole message, or a row from before spans)."""
    if r.span_start is None or r.span_end is None:
        return None
    return int(r.span_start), int(r.span_end)
