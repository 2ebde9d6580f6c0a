"""Tables of erasure (:mod:`streams.erasure`). They keep *who* was erased and up to
where, never *what*:

``erasure``
    one row per erasure request (``erasure_id`` unique within its tenant), in the
    order recorded (``seq``, which the other tables refer to): tenant, target and
    subject, the event-time ``cutoff`` and the chat-topic end offsets when it was
    recorded (JSON ``{partition: offset}``),
    its progress (``recorded`` -> ``planned`` -> ``fenced`` -> ``deleting`` ->
    ``done``, or ``blocked`` with the ``error`` that stopped it: the database
    refused a statement for good, a provider refused, a fault of memstream's
    own). A memory erasure also keeps the memory's cube, user, source
    event ids, kind and (a passage) span, so the same messages do not promote
    it again, and the other memories judged from them are still written. Kept for good:
    ingest, replay and reprocess skip what it covers.
``erasure_count``
    what went, per store (a table, ``redis_keys``, ``sessions_table``,
    ``memos``, ``mem0``), added in the transaction that deleted it, so a
    resumed erasure reports the whole count.
``erasure_fence``
    the partitions of the ingest stage that passed the erasure's fence
    (``round`` 1: took the erasure in; ``round`` 2: deleted the session states
    of the conversations a user erasure takes whole).
``erasure_conversation``
    the conversations a user or conversation erasure touches, found when it is
    planned and again after its fence (``whole``: the conversation goes entirely);
    dropped when done.
``erased_event``
    the messages an erasure deleted that its event-time ``cutoff`` does not
    cover (dated after it: a producer whose clock runs ahead, or a message sent
    while the erasure ran): tenant and event id, the event's own time and the
    erasure's ``seq``. Ingest refuses these event ids, so an upstream re-sending
    one does not bring it back; purged with the messages' retention
    (``created_at``), kept for good without one.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from streams.adapters.db.schema.conversation import BigId, BinaryKey, Timestamp, metadata

ERASURE_ID_LEN = 64
ERROR_LEN = 255

erasure = Table(
    "erasure",
    metadata,
    Column("seq", BigId, primary_key=True, autoincrement=True),
    Column("erasure_id", BinaryKey(ERASURE_ID_LEN), nullable=False),
    Column("tenant_id", BinaryKey(64), nullable=False),
    Column("target", String(16), nullable=False),
    Column("subject", BinaryKey(255), nullable=False),
    Column("reference", String(128)),
    Column("cutoff", Timestamp, nullable=False),
    Column("chat_offsets", Text, nullable=False),
    Column("memory_cube", BinaryKey(255)),
    Column("memory_user_id", BinaryKey(255)),
    Column("memory_sources", Text),
    Column("memory_kind", String(8)),  # the erased memory's kind; NULL: before 0016
    Column("span_start", Integer),  # an erased passage's offsets in its message
    Column("span_end", Integer),
    Column("status", String(16), nullable=False),
    Column("requested_at", Timestamp, nullable=False),
    Column("updated_at", Timestamp, nullable=False),
    Column("finished_at", Timestamp),
    Column("error", String(ERROR_LEN)),  # why it is blocked: the error's class and code, no SQL
    UniqueConstraint("tenant_id", "erasure_id"),
    Index(None, "tenant_id", "target", "subject"),
    Index(None, "status", "seq"),  # last_done(), every second on every worker (0014)
)

erasure_count = Table(
    "erasure_count",
    metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("store", String(64), primary_key=True),
    Column("count", BigInteger, nullable=False),
)

erasure_fence = Table(
    "erasure_fence",
    metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("round", Integer, primary_key=True, autoincrement=False, server_default="1"),
    Column("partition", Integer, primary_key=True, autoincrement=False),
    Column("passed_at", Timestamp, nullable=False),
)

erasure_conversation = Table(
    "erasure_conversation",
    metadata,
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("conversation_id", BinaryKey(255), primary_key=True),
    Column("whole", Boolean, nullable=False),
)

erased_event = Table(
    "erased_event",
    metadata,
    Column("tenant_id", BinaryKey(64), primary_key=True),
    Column("event_id", BinaryKey(128), primary_key=True),
    Column("created_at", Timestamp, nullable=False),  # the event's own time
    Column("seq", BigInteger, nullable=False),  # the erasure that deleted it
    Index(None, "created_at"),  # by the event's time, for an operator (never purged)
)
