"""What the read-only stats API (``/stats/*``) needs in the database.

``memory_search_log``
    one row per long-term memory search of the query path: who searched
    (tenant, user, agent), when, how long it took, how many memories came
    back, from which provider, whether it was keyword-only, and its outcome.
    Written by :class:`streams.stats.search_log.SearchLog`, purged after
    ``MEMSTREAM_WEB__STATS_SEARCH_LOG_RETENTION_DAYS``.

The indexes below serve the stats queries on tables declared elsewhere. Every
one starts with ``tenant_id``, so each query reads only the asking tenant's
index range; the trailing columns make the common aggregates index-only:

* ``conversation_message (tenant_id, created_at, conversation_id)`` — messages
  and active conversations per time bucket, first and last message;
* ``conversation_message (tenant_id, agent_id, created_at)`` — messages and
  last activity per agent, the agent count;
* ``memory (tenant_id, type, scope, kind, valid_to)`` — the distribution by
  type, scope and kind, valid and expired;
* ``memory (tenant_id, cube, type, valid_to, superseded_by)`` — counts per
  cube, and per type inside one cube (valid, expired, superseded);
* ``memory (tenant_id, cube, created_at)`` — a cube's newest memories, paged;
* ``memory (tenant_id, agent_id, valid_to)`` — memories per agent;
* ``memory (tenant_id, created_at)`` — memories created per time bucket.

Declaring an :class:`~sqlalchemy.Index` on another module's table attaches it
to that table, so importing this module completes the shared ``metadata``.
Migration ``0004`` creates all of it.
"""

from __future__ import annotations

from sqlalchemy import Boolean, Column, Float, Index, Integer, String, Table

from streams.adapters.db.schema.conversation import (
    BigId,
    BinaryKey,
    Timestamp,
    conversation_message,
    metadata,
)
from streams.adapters.db.schema.memory import memory

memory_search_log = Table(
    "memory_search_log",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("tenant_id", BinaryKey(64), nullable=False),
    Column("user_id", BinaryKey(255), nullable=False),
    Column("agent_id", BinaryKey(255), nullable=False),
    Column("created_at", Timestamp, nullable=False),
    Column("latency_ms", Float, nullable=False),
    Column("results", Integer, nullable=False),
    Column("provider", String(16), nullable=False),
    Column("keyword_only", Boolean, nullable=False),
    Column("outcome", String(16), nullable=False),
    Index(None, "tenant_id", "created_at"),
    Index(None, "created_at"),
    Index(None, "tenant_id", "user_id"),  # an erasure of a user (0014)
    mysql_charset="utf8mb4",
)

_m, _msg = memory.c, conversation_message.c

STATS_INDEXES = (
    Index("ix_conversation_message_tenant_id_created_at_conversation_id",
          _msg.tenant_id, _msg.created_at, _msg.conversation_id),
    Index("ix_conversation_message_tenant_id_agent_id_created_at",
          _msg.tenant_id, _msg.agent_id, _msg.created_at),
    Index("ix_memory_tenant_id_type_scope_kind_valid_to",
          _m.tenant_id, _m.type, _m.scope, _m.kind, _m.valid_to),
    Index("ix_memory_tenant_id_cube_type_valid_to_superseded_by",
          _m.tenant_id, _m.cube, _m.type, _m.valid_to, _m.superseded_by),
    Index("ix_memory_tenant_id_cube_created_at", _m.tenant_id, _m.cube, _m.created_at),
    Index("ix_memory_tenant_id_agent_id_valid_to", _m.tenant_id, _m.agent_id, _m.valid_to),
    Index("ix_memory_tenant_id_created_at", _m.tenant_id, _m.created_at),
)
"""The indexes 0004 adds to ``conversation_message`` and ``memory``."""
