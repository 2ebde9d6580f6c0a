"""StaleMarkStore: the durable stale-history marks (``stale_history_mark``).

A mark says "this conversation's Redis list may miss messages the database
holds". Every write of a mark gives it a new random ``mark_id``; clearing is
conditional on the id that was read, so a heal that saw an older mark never
deletes a newer one (written by a failure the heal did not cover).

Implements :class:`streams.session.ports.StaleMarks`: a failed read or clear
raises :class:`~streams.stores.StoreUnavailable` (or, for an error no retry mends,
:class:`~streams.stores.StoreRefused`), naming the driver's error; a failed mark
or page raises the driver's error, which the caller retries as it is.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime

from sqlalchemy import delete, func, select, tuple_
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.engine import upsert
from streams.adapters.db.errors import DbErrorKind, classify_db_error
from streams.adapters.db.schema.conversation import stale_history_mark
from streams.clock import naive_utc
from streams.session.model import ConversationKey, StaleMark
from streams.stores import StoreRefused, StoreUnavailable


@contextmanager
def _store_errors() -> Iterator[None]:
    """The driver's errors as the port's: passing ones unavailable, the rest refused."""
    try:
        yield
    except (SQLAlchemyError, OSError, TimeoutError) as exc:
        error = StoreUnavailable if classify_db_error(exc).kind is DbErrorKind.TRANSIENT \
            else StoreRefused
        raise error(f"{type(exc).__name__}: {exc}") from exc


class StaleMarkStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._upsert = upsert(engine, stale_history_mark, ["tenant_id", "conversation_id"],
                              ["mark_id", "marked_at"])

    async def mark(self, keys: Iterable[ConversationKey], now: datetime) -> int:
        """Mark ``keys`` stale in one transaction (a mark already there gets the
        new id); returns the id. Raises the driver's error; nothing is committed then."""
        mark_id = secrets.randbits(63) or 1  # never UNKNOWN_MARK (0)
        at = naive_utc(now)
        rows = [{"tenant_id": t, "conversation_id": c, "mark_id": mark_id, "marked_at": at}
                for t, c in sorted(set(keys))]  # one order for every writer: no deadlock
        if rows:
            async with self.engine.begin() as conn:
                await conn.execute(self._upsert, rows)
        return mark_id

    async def get(self, tenant_id: str, conversation_id: str) -> StaleMark | None:
        m = stale_history_mark.c
        q = select(m.mark_id).where(m.tenant_id == tenant_id, m.conversation_id == conversation_id)
        with _store_errors():
            async with self.engine.connect() as conn:
                mark_id = (await conn.execute(q)).scalar_one_or_none()
        return None if mark_id is None else StaleMark(tenant_id, conversation_id, int(mark_id))

    async def page(self, after: ConversationKey | None, limit: int) -> list[StaleMark]:
        """Up to ``limit`` marks in key order, starting after ``after``."""
        m = stale_history_mark.c
        q = select(m.tenant_id, m.conversation_id, m.mark_id)
        if after is not None:
            q = q.where(tuple_(m.tenant_id, m.conversation_id) > tuple_(*after))
        q = q.order_by(m.tenant_id, m.conversation_id).limit(limit)
        async with self.engine.connect() as conn:
            rows = (await conn.execute(q)).all()
        return [StaleMark(r.tenant_id, r.conversation_id, int(r.mark_id)) for r in rows]

    async def clear(self, marks: Sequence[StaleMark]) -> dict[ConversationKey, int]:
        """Delete each of ``marks`` unless it was marked again since (its id
        changed). Returns the keys still marked, with their id now."""
        if not marks:
            return {}
        m = stale_history_mark.c
        keys = [mk.key for mk in marks]
        with _store_errors():
            async with self.engine.begin() as conn:
                await conn.execute(delete(stale_history_mark).where(
                    tuple_(m.tenant_id, m.conversation_id, m.mark_id).in_(
                        [(mk.tenant_id, mk.conversation_id, mk.mark_id) for mk in marks])))
                left = await conn.execute(
                    select(m.tenant_id, m.conversation_id, m.mark_id)
                    .where(tuple_(m.tenant_id, m.conversation_id).in_(keys)))
                return {(r.tenant_id, r.conversation_id): int(r.mark_id) for r in left}

    async def count(self) -> int:
        async with self.engine.connect() as conn:
            q = select(func.count()).select_from(stale_history_mark)
            return int((await conn.execute(q)).scalar_one())
