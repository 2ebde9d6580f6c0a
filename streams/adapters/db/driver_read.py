"""A SELECT compiled once and run on the driver's connection beneath an SQLAlchemy one.

Around each execution SQLAlchemy walks the statement for its cache key, builds an
execution context, processes the parameters and the result, and switches greenlets
for every driver call: for a short read by an index, half of its CPU and more. A
statement read very often (the scope versions that open every search,
:mod:`streams.memory.providers.builtin.held_reads`) is run here instead: its SQL and
the order of its parameters are taken once from SQLAlchemy's own compilation for the
connection's dialect, and each read is one ``execute`` and one ``fetchall`` of the
driver's cursor.

Only for what needs no conversion: the statement's parameters and columns must be of
types with no bind or result processing on that dialect (integers and strings on
aiomysql), none rendered at execution (an ``IN`` list, ``literal_execute``) or
given by a callable, and the driver's parameters positional (``%s``). :class:`DriverRead`
refuses any other (``ValueError``), so the caller runs it through SQLAlchemy. The
rows are named tuples of the statement's column keys, as SQLAlchemy's rows are read.
The driver's errors are its own (:data:`DRIVER_ERRORS`), not SQLAlchemy's; nothing is
logged by the engine's ``echo``.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping
from typing import Any, cast

from aiomysql import MySQLError
from sqlalchemy import Select
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import InvalidRequestError
from sqlalchemy.ext.asyncio import AsyncConnection

DRIVER_ERRORS: tuple[type[Exception], ...] = (cast(type[Exception], MySQLError),)
"""What a read raises when the server or the connection fails (aiomysql's, PyMySQL's)."""


class DriverRead:
    def __init__(self, statement: Select[Any], dialect: Dialect) -> None:
        """``statement`` compiled for ``dialect`` (one that has connected: a dialect's
        types may depend on its server); ValueError when it needs any conversion."""
        if dialect.driver != "aiomysql":
            raise ValueError(f"driver reads are for aiomysql, not {dialect.driver}")
        compiled = statement.compile(dialect=dialect)
        if compiled.positiontup is None:
            raise ValueError("the dialect's parameters are not positional")
        if compiled.post_compile_params or compiled.literal_execute_params:
            raise ValueError("parameters rendered at execution (an IN list, a literal_execute)")
        for name in compiled.positiontup:
            bind = compiled.binds[name]
            if bind.callable is not None:
                raise ValueError(f"parameter {name!r} takes its value from a callable")
            if bind.type.dialect_impl(dialect).bind_processor(dialect) is not None:
                raise ValueError(f"parameter {name!r} ({bind.type!r}) is converted on binding")
        keys = list(statement.selected_columns.keys())
        for key, column in zip(keys, statement.selected_columns, strict=True):
            impl = column.type.dialect_impl(dialect)
            if impl.result_processor(dialect, None) is not None:
                raise ValueError(f"column {key!r} ({column.type!r}) is converted when read")
        self.sql = compiled.string
        self.names: list[str] = list(compiled.positiontup)
        self.fixed = {name: bind.value for name, bind in compiled.binds.items()
                      if not bind.required}  # the statement's own values (a literal's)
        self.row = namedtuple("row", keys, rename=True)  # type: ignore[misc]

    async def rows(self, conn: AsyncConnection, params: Mapping[str, Any]) -> list[Any]:
        """The statement's rows with ``params`` (by name; one missing: SQLAlchemy's
        ``InvalidRequestError``, as its own execution raises),
        read on ``conn``'s driver connection: in its transaction state, whatever that
        is (autocommit: the latest committed rows)."""
        try:
            args = [params[n] if n in params else self.fixed[n] for n in self.names]
        except KeyError as exc:  # as SQLAlchemy says it
            raise InvalidRequestError(f"A value is required for bind parameter {exc}") from None
        driver: Any = (await conn.get_raw_connection()).driver_connection
        async with driver.cursor() as cursor:
            await cursor.execute(self.sql, args)
            found = await cursor.fetchall()
        return [self.row(*r) for r in found]
