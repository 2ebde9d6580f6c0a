"""The built-in provider's memories an erasure selects
(:class:`~streams.erasure.ports.BuiltinMemories`): a
:class:`~streams.erasure.model.BuiltinRows` made a condition on the ``memory``
table, handed to the provider, which deletes the rows with their postings,
vectors and statistics."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import ColumnElement, and_, true

from streams.adapters.db.schema.memory import memory
from streams.adapters.db.unavailable import db_unavailable
from streams.erasure.model import MEMORY_TABLE, BuiltinRows
from streams.erasure.ports import RecordCounts
from streams.memory.providers.builtin.provider import BuiltinProvider

assert memory.name == MEMORY_TABLE


def where(rows: BuiltinRows) -> ColumnElement[bool]:
    """The condition on ``memory`` (within the tenant) selecting ``rows``."""
    m = memory.c
    if rows.ids is not None:
        return m.id.in_(list(rows.ids))
    if rows.user_id is not None:
        mine = m.user_id == rows.user_id
        return mine if rows.cube is None else and_(mine, m.cube == rows.cube)
    return true()


class BuiltinCopies:
    def __init__(self, builtin: BuiltinProvider) -> None:
        self.builtin = builtin

    async def erase(self, tenant_id: str, rows: BuiltinRows, record: RecordCounts,
                    stop: Callable[[], bool] | None = None) -> None:
        await self.builtin.erase(tenant_id, where(rows), record, stop)

    async def count(self, tenant_id: str, rows: BuiltinRows) -> dict[str, int]:
        with db_unavailable():
            return await self.builtin.eraser.count(tenant_id, where(rows))
