"""What an erasure finds in the stored messages before it deletes anything: the
conversations a user has messages in, and which of them nobody else spoke in (an
erasure of the user takes those whole).

The erasure looks them up itself
(:meth:`streams.adapters.db.erasure_deletes.TableDeletes.conversations_of`, through
the user's index on ``conversation_message``) and records them with the erasure
(``erasure_conversation``). :class:`ConversationReads` is the ingest stage's read
of that record (:class:`streams.ingest.ports.WholeConversations`), for the second
round of a user erasure's fence: a primary-key range of the erasure's own rows,
never a scan of the messages inside an ingest batch.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.schema.conversation import conversation_message
from streams.adapters.db.schema.erasure import erasure_conversation
from streams.erasure.model import EraseConversation

_m = conversation_message.c


async def conversations_of(engine: AsyncEngine, tenant_id: str,
                           user_id: str) -> list[EraseConversation]:
    """The conversations ``user_id`` has messages in; ``whole`` when nobody else does."""
    speakers = func.count(func.distinct(_m.user_id))
    q = (select(_m.conversation_id, speakers.label("speakers"))
         .where(_m.tenant_id == tenant_id, _m.conversation_id.in_(
             select(_m.conversation_id).where(_m.tenant_id == tenant_id,
                                              _m.user_id == user_id)))
         .group_by(_m.conversation_id).order_by(_m.conversation_id))
    async with engine.connect() as conn:
        rows = (await conn.execute(q)).all()
    return [EraseConversation(str(r.conversation_id), int(r.speakers) == 1) for r in rows]


class ConversationReads:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def whole_conversations(self, seq: int) -> list[str]:
        """The conversations erasure ``seq`` takes whole, as it recorded them (none once
        it is done). Raises the driver's error."""
        return await self._conversations(seq, whole=True)

    async def shared_conversations(self, seq: int) -> list[str]:
        """The conversations erasure ``seq`` takes the user's messages of, others
        speaking in them too, as it recorded them (none once it is done)."""
        return await self._conversations(seq, whole=False)

    async def _conversations(self, seq: int, *, whole: bool) -> list[str]:
        c = erasure_conversation.c
        async with self.engine.connect() as conn:
            return [str(v) for v in (await conn.execute(select(c.conversation_id).where(
                c.seq == seq, c.whole.is_(whole)))).scalars()]
