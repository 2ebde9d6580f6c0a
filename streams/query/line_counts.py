"""The token counts of the budget lines of the memories a worker holds, taken when a
scope is read rather than when a query first meets a line.

At 100,000 memories a cube most lines a query's budget examines have never been
counted before (a search's candidates are new each time), and counting one with
tiktoken costs far more than the rest of its share of the budget. A scope's load
reads every valid memory of it anyway, in a thread: the lines of the rows the
worker holds are counted there (:meth:`BudgetLineCounts.prepare`), and the counts
memoised by the worker's counter once the load is done, so a query's budget
finds them there. The counts are the counter's own, of the very text
:func:`~streams.query.rules.budget.memory_line` gives the budget: replies are the
same, only sooner.

The built-in provider knows nothing of the budget: it calls back whatever
:class:`~streams.memory.providers.builtin.row_cache.RowsRead` the worker gives
it (``streams/worker/runtime.py``), and this module knows nothing of the provider
but the three fields of a held memory it reads (:class:`HeldMemory`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol

from streams.query.rules.budget import memory_line
from streams.tokens import TokenCounter


class HeldMemory(Protocol):
    """What a budget line is made of, of a memory the worker holds."""

    @property
    def kind(self) -> str: ...

    @property
    def content(self) -> str: ...

    @property
    def event_time(self) -> datetime | None: ...


class BudgetLineCounts:
    """:class:`~streams.memory.providers.builtin.row_cache.RowsRead` for the budget: each
    held memory's line, cut to ``max_chars`` as the query cuts its memories, counted."""

    def __init__(self, counter: TokenCounter, max_chars: int) -> None:
        self.counter = counter
        self.max_chars = max_chars

    def lines(self, rows: Sequence[HeldMemory]) -> list[str]:
        cut = self.max_chars
        return [memory_line(r.kind, r.content[:cut], r.event_time) for r in rows]

    def prepare(self, rows: Sequence[HeldMemory]) -> Callable[[], None]:
        lines = self.lines(rows)
        counted = list(zip(lines, self.counter.counts(lines), strict=True))
        return lambda: self.counter.remember(counted)
