"""The project's whole database schema, on the one ``MetaData`` of
:mod:`streams.adapters.db.schema.conversation`.

Each table module adds its tables to that ``MetaData`` when it is imported
(:mod:`streams.adapters.db.schema.stats` adds indexes to other modules' tables too), so
a part of the schema is missing wherever a module happens not to be imported.
Importing this module imports all of them: Alembic's autogenerate compares the
migrated database with this (``migrations/env.py``). A module that declares
tables belongs in :data:`TABLE_MODULES`; a test checks that none is left out.
"""

from __future__ import annotations

from types import ModuleType

from streams.adapters.db.schema import (
    consolidation,
    conversation,
    erasure,
    memory,
    reprocess,
    stats,
)
from streams.adapters.db.schema.conversation import metadata

TABLE_MODULES: tuple[ModuleType, ...] = (conversation, memory, consolidation, reprocess, stats,
                                         erasure)

__all__ = ["TABLE_MODULES", "metadata"]
