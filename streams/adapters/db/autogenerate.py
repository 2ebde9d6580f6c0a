"""How Alembic's autogenerate compares the database with the declared schema
(``migrations/env.py``; ``alembic check`` and ``alembic revision --autogenerate``).

Alembic compares column types by kind and length, nullability, indexes and,
with ``compare_server_default``, defaults, but on MySQL it does not see a
column's collation or the fractional seconds of a ``DATETIME``. Both matter
here: identity columns compare exactly (a NO PAD binary collation: tenant
``A`` is not tenant ``a``, conversation ``c-1 `` is not ``c-1``) and times
keep microseconds (``DATETIME(6)``), so :func:`compare_type` adds them.
"""

from __future__ import annotations

from typing import Any

from alembic.runtime.migration import MigrationContext
from sqlalchemy import Column
from sqlalchemy.types import TypeDecorator, TypeEngine

# what the declared type and the reflected one must agree on, beyond Alembic's checks
MYSQL_TYPE_DETAILS = ("collation", "fsp")


def compare_type(context: MigrationContext, inspected_column: Column[Any],
                 metadata_column: Column[Any], inspected_type: TypeEngine[Any],
                 metadata_type: TypeEngine[Any]) -> bool | None:
    """True when a MySQL column's collation or fractional seconds differ from
    the declaration (a column without a collation has its table's default);
    None lets Alembic compare the rest."""
    dialect = context.dialect
    if dialect.name != "mysql":
        return None
    if isinstance(metadata_type, TypeDecorator):  # ExactKey: its type on this server
        declared = metadata_type.load_dialect_impl(dialect)
    else:
        declared = metadata_type.dialect_impl(dialect)  # the MySQL variant, if any
    for detail in MYSQL_TYPE_DETAILS:
        if getattr(declared, detail, None) != getattr(inspected_type, detail, None):
            return True
    return None


COMPARE_OPTIONS: dict[str, Any] = {
    "compare_type": compare_type,
    "compare_server_default": True,
}
"""The comparison options of ``context.configure`` in ``migrations/env.py``."""
