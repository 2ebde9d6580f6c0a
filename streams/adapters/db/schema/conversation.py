"""Database tables (SQLAlchemy Core), shared by MySQL and the embedded SQLite.

Alembic migrations under ``migrations/`` create these; a test checks that the
migrated schema matches this metadata. Times are stored as naive UTC.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects import mysql
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# BIGINT autoincrement on MySQL; SQLite only auto-increments an INTEGER primary key.
BigId = BigInteger().with_variant(Integer(), "sqlite")
LongText = Text().with_variant(mysql.MEDIUMTEXT(), "mysql")
Timestamp = DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql")


class ExactKey(TypeDecorator[str]):
    """A string compared exactly on MySQL too: byte for byte, trailing spaces
    included (a NO PAD binary collation), so ``acme`` and ``ACME`` are two
    tenants and ``c-1`` and ``c-1 `` two conversations."""

    impl = String
    cache_ok = True

    def __init__(self, length: int) -> None:
        super().__init__(length)
        self.length = length

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "mysql":
            return dialect.type_descriptor(mysql.VARCHAR(
                self.length, charset="utf8mb4", collation=exact_collation(dialect)))
        return dialect.type_descriptor(String(self.length))


def exact_collation(dialect: Dialect) -> str:
    """The server's NO PAD binary collation (``utf8mb4_bin`` pads)."""
    if getattr(dialect, "is_mariadb", False):
        return "utf8mb4_nopad_bin"
    version = dialect.server_version_info or (0,)
    return "utf8mb4_0900_bin" if version >= (8, 0, 0) else "utf8mb4_bin"


def BinaryKey(length: int) -> TypeEngine[str]:
    return ExactKey(length)

conversation_message = Table(
    "conversation_message",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("tenant_id", BinaryKey(64), nullable=False),
    Column("event_id", BinaryKey(128), nullable=False),
    Column("conversation_id", BinaryKey(255), nullable=False),
    Column("user_id", BinaryKey(255), nullable=False),
    Column("agent_id", BinaryKey(255), nullable=False),
    Column("role", String(16), nullable=False),
    Column("name", String(255)),
    Column("content", LongText, nullable=False),
    Column("tool_calls", Text),
    Column("tool_call_id", String(255)),
    Column("origin_conversation_id", BinaryKey(255)),
    Column("created_at", Timestamp, nullable=False),
    Column("ingested_at", Timestamp, nullable=False),
    # the session the message belongs to (see streams.session.model);
    # NULL for messages stored before sessions were stamped
    Column("session_seq", Integer),
    UniqueConstraint("tenant_id", "event_id"),
    Index(None, "tenant_id", "conversation_id", "id"),
    Index(None, "tenant_id", "conversation_id", "session_seq"),
    Index(None, "created_at"),
    Index(None, "ingested_at"),  # retention (streams.erasure.retention, 0017)
    # an erasure of a user (their conversations, agents, messages) and of a
    # sub-agent conversation stored in its parents (0014)
    Index(None, "tenant_id", "user_id", "conversation_id"),
    Index(None, "tenant_id", "origin_conversation_id"),
)

# The last closed session of a conversation whose state left the sessions table,
# so that its session numbers go on where they stopped.
conversation_session = Table(
    "conversation_session",
    metadata,
    Column("tenant_id", BinaryKey(64), primary_key=True),
    Column("conversation_id", BinaryKey(255), primary_key=True),
    Column("last_closed_seq", Integer, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
)

conversation_summary = Table(
    "conversation_summary",
    metadata,
    Column("tenant_id", BinaryKey(64), primary_key=True),
    Column("conversation_id", BinaryKey(255), primary_key=True),
    Column("summary", LongText, nullable=False),
    Column("covered_until_id", BigInteger, nullable=False),
    Column("covered_count", Integer, nullable=False),
    Column("token_count", Integer, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
    Index(None, "updated_at"),  # retention (streams.erasure.retention, 0014)
)

# One row per conversation whose Redis list may miss stored messages (a write
# to Redis failed after the batch was stored); see streams/session/stale.py. Each new
# mark replaces mark_id, so clearing an older mark never deletes a newer one.
stale_history_mark = Table(
    "stale_history_mark",
    metadata,
    Column("tenant_id", BinaryKey(64), primary_key=True),
    Column("conversation_id", BinaryKey(255), primary_key=True),
    Column("mark_id", BigInteger, nullable=False),
    Column("marked_at", Timestamp, nullable=False),
)

# Dead letters published, by the record they stand for: a redelivered record is
# not dead-lettered twice (see streams.adapters.kafka.dead_letters).
dead_letter_ledger = Table(
    "dead_letter_ledger",
    metadata,
    Column("source_topic", BinaryKey(249), primary_key=True),
    Column("source_partition", Integer, primary_key=True, autoincrement=False),
    Column("source_offset", BigInteger, primary_key=True, autoincrement=False),
    Column("dlq_partition", Integer, nullable=False),
    Column("sent", Integer, nullable=False),
    Column("recorded_at", Timestamp, nullable=False),
    Column("recorded_by", String(32), nullable=False),  # the attempt that recorded it
    # a digest of the record (key, value, timestamp): after a topic is created again,
    # another record at the same place replaces the row; NULL: recorded before 0016
    Column("record_digest", String(64), nullable=True),
    Index(None, "recorded_at"),
)

# queries whose reply the broker acknowledged, by a digest of reply topic and
# correlation id: a request delivered again after its worker died is not
# answered twice, even when Redis lost its copy of the record
answered_request = Table(
    "answered_request",
    metadata,
    Column("request_key", BinaryKey(64), primary_key=True),
    Column("answered_at", Timestamp, nullable=False),
    Index(None, "answered_at"),
)
