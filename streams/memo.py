"""Bounded memos the garbage collector does not walk.

A full collection walks every container the collector tracks, and every
reference each one holds: a worker's whole heap, during which nothing else
runs (the pauses :mod:`streams.worker.gc_tuning` makes rare). A
``functools.lru_cache`` or an ``OrderedDict`` is always tracked, so a memo of
65,536 stems or 50,000 token counts added its entries to every pause.

CPython never tracks a plain ``dict`` whose keys and values are all untracked
(strings, numbers, bytes, and tuples of those once a collection has seen them),
and stops tracking one that only holds such entries at the next full
collection. :class:`Memo` keeps its entries in such a dict, so a memo of
strings and numbers costs the collector nothing, however large.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


def drop_oldest(items: dict[K, V], n: int) -> None:
    """Delete the ``n`` entries first in ``items``' order (its oldest, when every use
    re-inserts a key at the end): one walk from the front, not one per entry."""
    # the keys listed in one step (the GIL held throughout), not through an iterator a
    # thread using the memo meanwhile could invalidate; each perhaps gone since
    for key in list(items)[:n]:
        items.pop(key, None)


class Memo(Generic[K, V]):
    """``compute`` memoised for up to ``maxsize`` keys. A hit moves its key to the end
    of the dict; a miss with the memo full drops the older half first, so the ones
    dropped are the least recently used and the work of dropping is one pass per
    ``maxsize / 2`` misses."""

    __slots__ = ("_items", "compute", "maxsize")

    def __init__(self, compute: Callable[[K], V], maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"a memo holds at least one entry, not {maxsize}")
        self.compute = compute
        self.maxsize = maxsize
        self._items: dict[K, V] = {}

    def __call__(self, key: K) -> V:
        items = self._items
        try:
            value = items.pop(key)
        except KeyError:
            value = self.compute(key)
            if len(items) >= self.maxsize:
                drop_oldest(items, max(1, self.maxsize // 2))
        items[key] = value
        return value

    def remember(self, pairs: Sequence[tuple[K, V]]) -> None:
        """Hold values computed elsewhere (``compute``'s, for these keys), as the most
        recently used; the least recently used go when over ``maxsize``."""
        items = self._items
        for key, value in pairs[-self.maxsize:]:
            items.pop(key, None)
            items[key] = value
        if (over := len(items) - self.maxsize) > 0:
            drop_oldest(items, over)

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        self._items.clear()
