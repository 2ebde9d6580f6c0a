"""ReprocessClaims: the ledger of a reprocess job's runs.

A job's sessions took their messages when the job was planned
(``reprocess_message``, :mod:`streams.adapters.db.reprocess_store`), so a claim
only counts them; like the live ledger, a message published twice (two event
ids, the same content hash) is taken once.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import and_, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from streams.adapters.db.ledger import (
    MESSAGE_COLUMNS,
    LedgerStore,
    message_hash,
    session_message,
)
from streams.adapters.db.schema.conversation import conversation_message
from streams.adapters.db.schema.reprocess import reprocess_message
from streams.consolidation.model import Claim, SessionMessage
from streams.consolidation.rules.parts import PartBound

_m = conversation_message.c


def distinct_messages(tenant_id: str, messages: Sequence[SessionMessage]) -> list[SessionMessage]:
    """The first of each content hash (the live ledger's identity of a message) among
    one session's messages."""
    seen: set[str] = set()
    out = []
    for m in messages:
        h = message_hash(tenant_id, "", m.role, m.name, m.content, m.created_at)
        if h not in seen:
            seen.add(h)
            out.append(m)
    return out


class ReprocessClaims(LedgerStore):
    """The ledger of a job's runs: their messages were fixed when it was planned."""

    async def claim(self, conn: AsyncConnection, *, tenant_id: str, conversation_id: str,
                    closed_id: str, session_seq: int, bound: datetime, size: PartBound,
                    now: datetime, until_event_id: str | None = None,
                    late_since: datetime | None = None, previous: str | None = None) -> Claim:
        x = reprocess_message.c
        return Claim(int((await conn.execute(select(func.count()).select_from(reprocess_message)
                                             .where(x.closed_id == closed_id))).scalar_one()))

    async def claimed_messages(self, tenant_id: str, closed_id: str) -> list[SessionMessage]:
        x = reprocess_message.c
        q = (select(*MESSAGE_COLUMNS)
             .select_from(conversation_message.join(reprocess_message, and_(
                 x.message_id == _m.id, x.closed_id == closed_id)))
             .where(_m.tenant_id == tenant_id).order_by(_m.id))
        async with self.engine.connect() as conn:
            rows = (await conn.execute(q)).all()
        return distinct_messages(tenant_id, [session_message(r) for r in rows])
