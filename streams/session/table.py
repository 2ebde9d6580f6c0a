"""SessionTable: the sessions table as the session stage reads and writes it.

In the worker it is the Faust ``sessions`` table
(:class:`streams.worker.faust_glue.FaustTable`); in tests a dict-backed fake.
Values are :meth:`SessionState.to_table` documents keyed by
:func:`streams.session.model.table_key`.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from streams.wire.envelope import SourceRecord


class SessionTable(Protocol):
    def get(self, key: str) -> dict[str, Any] | None: ...

    def set(self, key: str, value: dict[str, Any]) -> None: ...

    def stored_keys(self) -> Iterable[str]:
        """The keys this worker holds (of the partitions assigned to it)."""
        ...

    def delete(self, key: str) -> None:
        """Remove ``key``; a table with a changelog writes a tombstone."""
        ...

    def context(self, record: SourceRecord) -> AbstractContextManager[None]:
        """Writes inside this context belong to ``record``'s partition."""
        ...
