"""An approximate nearest-neighbour index of one scope's vectors, for large scopes.

The dense signal of a scope is the cosine of the query with every memory; a
matrix product gives it exactly, at a cost that follows the scope's size
(about 15 ms for 100,000 vectors of 384 floats on one core here). Beyond
``ann_min_vectors`` a scope also gets an HNSW graph (usearch, vectors held as
16-bit floats: half the memory of the scope's own), built in a worker
thread once the scope is held, kept up to date by the scope cache as memories
come and go, and asked for what the exact product was used for:

- the best ``k`` memories (the dense candidates of a search), and
- the memory farthest from the query (the low end of the signal's min-max
  normalisation): the nearest neighbour of the negated query.

Every score that reaches the fusion is still the exact cosine, from the
scope's float vectors; what is approximate is which memories the graph
proposes (``bench/ann.py`` measures how many of the exact best it finds).
Only memories the scope holds as valid are ever proposed: expired and erased
ones are removed from the graph when the scope learns of them, and anything
the graph returns that the scope does not hold is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from usearch.index import Index as HnswIndex  # named apart from SQLAlchemy's Index

Ids = npt.NDArray[np.int64]
Vector = npt.NDArray[np.float32]


@dataclass(frozen=True)
class AnnParams:
    """HNSW parameters (``bench/ann.py``: recall and speed measured with these)."""

    connectivity: int = 16
    expansion_add: int = 128
    expansion_search: int = 256
    dtype: str = "f16"  # 8-bit integers lost recall (0.92 against 0.998 at 10)


class VectorIndex:
    """Memory ids and their vectors in an HNSW graph by inner product (the vectors are
    L2-normalised: a cosine). Not thread-safe: built in a thread, then used and
    changed on the event loop only."""

    def __init__(self, dim: int, params: AnnParams = AnnParams()) -> None:
        self.params = params
        self._index = HnswIndex(ndim=dim, metric="ip", dtype=params.dtype,
                            connectivity=params.connectivity,
                            expansion_add=params.expansion_add,
                            expansion_search=params.expansion_search)

    @classmethod
    def build(cls, keys: Ids, vectors: Vector, params: AnnParams = AnnParams(),
              ) -> VectorIndex:
        """An index of ``vectors`` under ``keys`` (blocking: seconds for 100,000)."""
        out = cls(vectors.shape[1], params)
        out.add(keys, vectors)
        return out

    def __len__(self) -> int:
        return len(self._index)

    def keys(self) -> Ids:
        """Every key held, ascending."""
        return np.sort(np.asarray(self._index.keys, dtype=np.int64))

    def add(self, keys: Ids, vectors: Vector) -> None:
        if len(keys):
            self._index.add(keys.astype(np.uint64), np.ascontiguousarray(vectors), threads=1)

    def remove(self, keys: Ids) -> None:
        if len(keys):
            self._index.remove(keys.astype(np.uint64))

    def nearest(self, query: Vector, k: int) -> Ids:
        """About the ``k`` keys of the largest inner product with ``query``."""
        if k <= 0 or not len(self._index):
            return np.zeros(0, dtype=np.int64)
        found = self._index.search(query, k, threads=1)
        return np.asarray(found.keys, dtype=np.int64)

    def farthest(self, query: Vector) -> Ids:
        """About the key of the smallest inner product with ``query`` (at most one)."""
        return self.nearest(-query, 1)
