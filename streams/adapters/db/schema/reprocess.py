"""Tables of ``memstream reprocess`` (:mod:`streams.consolidation.reprocess`).

``reprocess_job``
    one row per job: what it rebuilds (tenant, optionally a user and a start
    time) and how far it got (``planned`` -> ``retiring`` -> ``done``).
``reprocess_session``
    the sessions a job rebuilds, fixed when it is planned: each is
    consolidated again as a run of its own (``closed_id`` ``{job}:{tenant}/
    {conversation}#{n}``), with the event-time span of its messages.
``reprocess_message``
    which stored messages each of those sessions holds.
``reprocess_retire``
    the memories the job replaces, fixed when it is planned (from
    ``memory_origin``), and when each was retired.

One job per tenant is unfinished at a time: ``active`` holds the tenant while
the job is not done (NULL after), under a unique index.

A job is resumable: every step is recorded, and running the same job again
continues where it stopped.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, Integer, String, Table

from streams.adapters.db.schema.consolidation import ClosedId
from streams.adapters.db.schema.conversation import BinaryKey, Timestamp, metadata

JOB_ID_LEN = 32

reprocess_job = Table(
    "reprocess_job",
    metadata,
    Column("job_id", BinaryKey(JOB_ID_LEN), primary_key=True),
    Column("tenant_id", BinaryKey(64), nullable=False),
    Column("user_id", BinaryKey(255)),
    Column("since", Timestamp),
    Column("status", String(16), nullable=False),
    Column("active", BinaryKey(64), unique=True),
    Column("sessions", Integer, nullable=False),
    Column("retired", Integer, nullable=False),
    Column("created_at", Timestamp, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
    Column("finished_at", Timestamp),
    Index(None, "tenant_id", "user_id"),  # the jobs an erasure finds (0014)
)

reprocess_session = Table(
    "reprocess_session",
    metadata,
    Column("closed_id", ClosedId, primary_key=True),
    Column("job_id", BinaryKey(JOB_ID_LEN), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("conversation_id", BinaryKey(255), nullable=False),
    Column("user_id", BinaryKey(255), nullable=False),
    Column("agent_id", BinaryKey(255), nullable=False),
    Column("first_at", Timestamp, nullable=False),
    Column("last_at", Timestamp, nullable=False),
    Column("message_count", Integer, nullable=False),
    Index(None, "job_id", "seq"),
)

reprocess_message = Table(
    "reprocess_message",
    metadata,
    Column("closed_id", ClosedId, primary_key=True),
    Column("message_id", BigInteger, primary_key=True, autoincrement=False),
)

reprocess_retire = Table(
    "reprocess_retire",
    metadata,
    Column("job_id", BinaryKey(JOB_ID_LEN), primary_key=True),
    Column("provider", String(16), primary_key=True),
    Column("memory_id", BinaryKey(255), primary_key=True),
    Column("cube", BinaryKey(255), nullable=False),
    Column("user_id", BinaryKey(255), nullable=False),
    Column("agent_id", BinaryKey(255), nullable=False),
    Column("retired_at", Timestamp),
    Index(None, "job_id", "cube", "user_id"),
)
