"""Storing: a batch's messages into the database, stamped with their sessions.

Writes are idempotent on ``(tenant_id, event_id)``. A transient error is
retried with backoff until it passes, so the batch is never acknowledged
before that; a row the database refuses for good is isolated (the batch is
split, its batch-mates stored; :class:`~streams.ingest.ports.RowBatches`) and
dead-lettered. The last session of each conversation whose state is dropped is
remembered before it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from streams.backoff import retry_forever
from streams.ingest.classify import rejected_record
from streams.ingest.model import (
    EventKey,
    IngestConfig,
    IngestResult,
    MessageRow,
    StoredRows,
    Taken,
    Tally,
    message_row,
)
from streams.ingest.ports import ClosedSessions, RowBatches
from streams.ingest.publishing import Delivery
from streams.metrics import SINK_FAILURES, SINK_LATENCY
from streams.session.model import split_table_key
from streams.session.rules.batch import SessionPlan
from streams.wire.decode import UNSTORABLE, Rejected
from streams.wire.records import ChatMessage


class MessageWriter:
    def __init__(self, config: IngestConfig, closed: ClosedSessions, batches: RowBatches,
                 deliver: Delivery) -> None:
        self.config = config
        self.closed = closed
        self.batches = batches
        self.deliver = deliver

    async def store(
        self, items: Sequence[Taken], plan: SessionPlan, result: IngestResult, tally: Tally
    ) -> tuple[set[EventKey], list[MessageRow], set[int]]:
        """Store the batch's messages, stamped with their sessions: transient
        database errors are retried until they pass; a row the database refuses
        for good is dead-lettered (its batch-mates are stored). Returns the new
        keys, the rows stored (or there already), and the indexes of the items
        refused. The plan is kept as it is: a refused message is counted in its
        session, but no stamp of the others changes."""
        now = datetime.now(UTC)
        indexes: list[int] = []
        rows: list[MessageRow] = []
        for i, it in enumerate(items):
            if isinstance(it.event, ChatMessage):
                indexes.append(i)
                rows.append(message_row(it.event, now, it.origin, plan.stamps[i]))
        expired = {split_table_key(k): seq for k, seq in plan.expired.items()}
        batch = self.batches.batch(rows)

        async def store() -> StoredRows:
            with SINK_LATENCY.labels("mysql").time():
                # remembered before the states are dropped (see SessionState.expired)
                await self.closed.remember_closed_sessions(expired, now)
                return await batch.run()

        written = await retry_forever(
            store,
            what="mysql",
            initial_s=self.config.retry_initial_s,
            max_s=self.config.retry_max_s,
        )
        if not written.refused:
            return written.stored, rows, set()
        dead = []
        for r in written.refused:
            SINK_FAILURES.labels("mysql", r.error_class).inc()
            dead.append(rejected_record(items[indexes[r.index]].record, Rejected(
                UNSTORABLE, r.error_class, f"the database refused the row: {r.detail}"),
                tally, dlq_topic=self.config.dlq_topic))
        await self.deliver(dead, "dlq")
        result.dead_lettered += len(dead)
        refused_rows = {r.index for r in written.refused}
        kept = [row for n, row in enumerate(rows) if n not in refused_rows]
        return written.stored, kept, {indexes[n] for n in refused_rows}
