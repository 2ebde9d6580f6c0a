"""Which of a held scope's memories are no longer valid, found by counting.

A held state knows its memories' ids; the database knows which are still
valid. When some left (expired, or erased before this process heard of the
erasure), reading every valid id of the scope to find them costs the scope's
size in rows parsed on the event loop. :func:`gone_ids` instead counts the
valid memories in ranges of the held ids (and sums their ids), ``FANOUT``
ranges a query, and narrows in on the ranges whose figures fell short; only
ranges of at most ``READ_AT_MOST`` held ids are read id by id. ``k`` gone
memories of ``n`` held cost at most ``k`` queries of one row per level,
``log(n / READ_AT_MOST) / log(FANOUT)`` levels, and about ``k × READ_AT_MOST``
ids read; when so many are gone that the ranges to narrow on exceed
``NARROW_AT_MOST``, those ranges are read whole instead.

The reads are the caller's (:data:`CountIn`, :data:`IdsIn`), so the search
is the same over any store and is tested without one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import numpy as np
import numpy.typing as npt

Ids = npt.NDArray[np.int64]
Bounds = tuple[int, int]  # an inclusive range of ids

# the number of valid memories within each range (disjoint, ascending), and the sum of
# their ids
CountIn = Callable[[Sequence[Bounds]], Awaitable[Sequence[tuple[int, int]]]]
# the ids of the valid memories within the ranges (disjoint, ascending)
IdsIn = Callable[[Sequence[Bounds]], Awaitable[set[int]]]

FANOUT = 8  # parts a short range is split into, counted by one query
READ_AT_MOST = 64  # held ids in a range read id by id rather than split again
NARROW_AT_MOST = 8  # short ranges narrowed at once; beyond it, so much is gone: read them
BOUNDS_PER_READ = 64  # ranges read by one query


async def gone_ids(held: Ids, count_in: CountIn, ids_in: IdsIn) -> set[int] | None:
    """The ids of ``held`` (ascending, unique) that the store no longer counts as
    valid; None when a range is seen to hold valid memories that are not held
    (the held state missed some: it cannot be brought forward from the counts).
    A range counts as whole only when both its count and the sum of its ids are
    those of the held ids in it, so a valid id not held does not hide a gone one
    in its range unless other such ids make up both figures exactly."""
    short: list[tuple[int, int]] = [(0, len(held))] if len(held) else []
    gone: set[int] = set()
    while short:
        if len(short) > NARROW_AT_MOST:
            small, large = short, []
        else:
            small = [r for r in short if r[1] - r[0] <= READ_AT_MOST]
            large = [r for r in short if r[1] - r[0] > READ_AT_MOST]
        for at in range(0, len(small), BOUNDS_PER_READ):
            ranges = small[at:at + BOUNDS_PER_READ]
            mine = np.concatenate([held[lo:hi] for lo, hi in ranges])
            present = np.fromiter(await ids_in([_bounds(held, r) for r in ranges]), np.int64)
            if len(np.setdiff1d(present, mine, assume_unique=True)):
                return None
            gone.update(int(i) for i in np.setdiff1d(mine, present, assume_unique=True))
        short = []
        for r in large:
            parts = _split(r, FANOUT)
            counts = await count_in([_bounds(held, p) for p in parts])
            for (lo, hi), (n, total) in zip(parts, counts, strict=True):
                if n > hi - lo:
                    return None
                if n < hi - lo or total != int(held[lo:hi].sum()):
                    short.append((lo, hi))
    return gone


def _split(r: tuple[int, int], parts: int) -> list[tuple[int, int]]:
    lo, hi = r
    step = -(-(hi - lo) // parts)
    return [(a, min(a + step, hi)) for a in range(lo, hi, step)]


def _bounds(held: Ids, r: tuple[int, int]) -> Bounds:
    """The ids from the range's first held one up to the next range's: every id
    between the first and the last held lies in exactly one range's bounds."""
    lo, hi = r
    return int(held[lo]), int(held[hi]) - 1 if hi < len(held) else int(held[-1])
