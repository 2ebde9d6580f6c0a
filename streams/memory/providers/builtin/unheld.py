"""Search of a scope larger than a worker holds: read per query, never loaded whole.

A scope with more valid memories than ``hold_max`` (:class:`~.scope_cache.ScopeCache`)
is searched from the database at each query, and only what the query needs is read:

- **lexical**: the postings of the query's terms from ``memory_term``, at most
  ``term_postings`` a term, the newest memories' first (a backward range of the
  table's primary key, so a common term costs the same at any scope size); a
  term cut so gets its document frequency counted (``COUNT(*)`` over its range),
  and BM25 uses the scope's counts from ``memory_scope_stats``. A memory's score is
  exact unless it holds a term that was cut and is older than that term's newest
  ``term_postings``: then the term's part of its score is missing. A query's rare
  words, which carry the ranking, are never cut at the default;
- **dense**: the vectors of the newest ``recent_vectors`` memories (a backward range
  of ``memory_embedding``'s primary key) and of every memory read for its words or as a
  neighbour, by primary key. A memory older than that which shares no word with
  the query is not found by its meaning. Nothing is held between queries, so no
  state goes stale and a write costs the readers nothing;
- the rows of the best of each signal (``candidates`` each), the lowest and highest
  of each (their normalisation's range) and the session neighbours of them all,
  valid ones only (``valid_to IS NULL``) of the caller's tenant and scope: a memory
  expired or erased before the read is never among them, and the rows of the
  memories finally chosen are read again by primary key, valid ones only;
- a search of facts only (a conflict check) reads the facts alone: the postings of
  the query's terms of the newest ``kind_memories`` valid facts (an index of
  ``memory`` by scope and kind) and the facts among each term's newest
  ``term_postings`` postings (so a fact holding a rare word is found at any age),
  the vectors of the newest ``recent_vectors`` of those facts and of every fact
  read for its words, and their rows, no neighbours. The database filters by kind;
  what comes back to the worker is what the search can use, however many episodes
  the scope holds. Every term's document frequency is counted over the whole
  scope, as the held path's. A search that wants episodes reads as above.

What is read becomes a :class:`~.scope_state.ScopeState` of those memories only, with
the scope's counts, which the held path's ranking then reads as it reads a held one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Select, Subquery, func, select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection

from streams.adapters.db.schema.memory import memory, memory_embedding, memory_term
from streams.memory.providers.builtin.rows import DbRow, Vector
from streams.memory.providers.builtin.scope_state import (
    Floats,
    Ids,
    Postings,
    ScopeState,
    postings_of,
)
from streams.memory.rules.lexical import bm25_arrays

_CHUNK = 500  # ids or (session, seq) pairs per IN (...) list
_NONE: Ids = np.zeros(0, dtype=np.int64)


@dataclass
class Unheld:
    """One scope's memories read for one query, its postings of the query's terms, and
    its lexical signal over the memories read (ids, BM25 scores)."""

    state: ScopeState
    postings: dict[str, Postings]
    lexical: tuple[Ids, Floats]


def best_of(ids: Ids, values: Floats, n: int) -> Ids:
    """The ``n`` best ids (ties: the earlier) and the lowest and the highest, ascending."""
    if not len(ids):
        return _NONE
    order = np.argsort(-values, kind="stable")
    keep = np.concatenate([order[:n], [int(np.argmin(values)), int(np.argmax(values))]])
    return np.unique(ids[keep])


def neighbour_slots(rows: Sequence[DbRow]) -> list[tuple[str, int]]:
    """The (session, seq) places next to the rows' that none of them holds."""
    taken = {(str(r.session_key), int(r.seq)) for r in rows if r.session_key is not None}
    return sorted({(s, q + d) for s, q in taken for d in (-1, 1)} - taken)


async def _document_frequency(conn: AsyncConnection, sid: int,
                              terms: list[str]) -> dict[str, int]:
    """The number of the scope's memories holding each of ``terms`` (absent: none)."""
    if not terms:
        return {}
    t = memory_term.c
    return {str(r.term): int(r.n) for r in await conn.execute(
        select(t.term, func.count().label("n"))
        .where(t.scope_id == sid, t.term.in_(terms)).group_by(t.term))}


@dataclass(frozen=True)
class UnheldLimits:
    """What one query reads of a scope not held: postings a term, newest vectors, and
    for a search of some kinds, the newest memories of those kinds it reads among."""

    term_postings: int = 2_000
    recent_vectors: int = 1_000
    kind_memories: int = 2_000


class UnheldReads:
    """The reads of one over-ceiling scope for one query (see the module's docstring)."""

    def __init__(self, model: tuple[str, int] | None,
                 limits: UnheldLimits = UnheldLimits()) -> None:
        self.model = model
        self.term_postings = max(1, limits.term_postings)
        self.recent_vectors = limits.recent_vectors
        self.kind_memories = max(1, limits.kind_memories)

    async def read(self, conn: AsyncConnection, stats: DbRow, tenant: str, terms: list[str],
                   qvec: Vector | None, candidates: int,
                   kinds: Sequence[str] | None = None) -> Unheld:
        """``kinds``: the search's (None: every kind; see the module's docstring)."""
        sid = int(stats.id)
        among = None
        if kinds is not None and "episode" not in kinds:  # episodes: the bulk of a scope
            among = self.newest_of_kinds(sid, kinds)
            postings, df = await self._postings_among(conn, sid, terms, kinds, among)
        else:
            postings, df = await self._postings(conn, sid, terms)
        n, total = int(stats.doc_count), int(stats.total_len)
        lex_ids, lex = bm25_arrays(terms, postings, n, float(total) / max(n, 1), df=df)
        wanted = best_of(lex_ids, lex, candidates)
        vectors: dict[int, bytes] = {}
        if qvec is not None and self.model is not None and self.recent_vectors > 0:
            vectors = await self._recent_vectors(conn, sid, among)
            if vectors:
                ids = np.fromiter(vectors, np.int64, len(vectors))
                near = (self._matrix(list(vectors.values())) @ qvec).astype(np.float64)
                wanted = np.union1d(wanted, best_of(ids, near, candidates))
        rows = await self._rows(conn, sid, tenant, wanted.tolist())
        if among is None:  # a search of facts keeps no neighbour of another kind
            rows += await self._neighbours(conn, sid, tenant, neighbour_slots(rows))
        rows.sort(key=lambda r: int(r.id))
        st = ScopeState(sid, int(stats.version), n, total, 0)
        st.add_rows(rows, index=False)  # its postings: the ones read
        if self.model is not None:
            st._buf = np.zeros((0, self.model[1]), np.float32)
            if qvec is not None:
                await self._vectors(conn, sid, st, vectors)
        held = np.array([str(i) in st.positions for i in lex_ids.tolist()], dtype=bool)
        return Unheld(st, postings, (lex_ids[held], lex[held]))

    def newest_of_kinds(self, sid: int, kinds: Sequence[str]) -> Subquery:
        """The ids of the scope's newest ``kind_memories`` valid memories of ``kinds``."""
        m = memory.c
        return (select(m.id).where(m.scope_id == sid, m.kind.in_(list(kinds)),
                                   m.valid_to.is_(None))
                .order_by(m.id.desc()).limit(self.kind_memories).subquery("among"))

    async def _recent_vectors(self, conn: AsyncConnection, sid: int,
                              among: Subquery | None) -> dict[int, bytes]:
        """The newest ``recent_vectors`` vectors of the scope (of ``among`` only)."""
        assert self.model is not None
        e = memory_embedding.c
        q = select(e.memory_id, e.vector).where(e.scope_id == sid, e.model == self.model[0])
        if among is not None:
            q = q.join(among, among.c.id == e.memory_id)
        return {int(r.memory_id): r.vector for r in await conn.execute(
            q.order_by(e.memory_id.desc()).limit(self.recent_vectors))}

    async def _postings_among(self, conn: AsyncConnection, sid: int, terms: list[str],
                              kinds: Sequence[str], among: Subquery,
                              ) -> tuple[dict[str, Postings], dict[str, int]]:
        """The postings of the query's terms of the memories ``among`` and, when those
        are not all of ``kinds``, of the older ones among each term's newest
        ``term_postings``; every term's document frequency over the whole scope."""
        t, m = memory_term.c, memory.c
        unique = list(dict.fromkeys(terms))
        if not unique:
            return postings_of([], terms), {}
        rows = list((await conn.execute(
            select(t.term, t.memory_id, t.tf, t.doc_len)
            .join(among, among.c.id == t.memory_id)
            .where(t.scope_id == sid, t.term.in_(unique)))).all())
        count, oldest = (await conn.execute(
            select(func.count(), func.min(among.c.id)))).one()
        if int(count) >= self.kind_memories:  # older ones: those among a term's newest
            for term in unique:
                newest = self._newest_postings(sid, term).subquery()
                rows.extend(await conn.execute(
                    select(newest).join(memory, m.id == newest.c.memory_id)
                    .where(newest.c.memory_id < int(oldest), m.kind.in_(list(kinds)),
                           m.valid_to.is_(None))))
        return postings_of(rows, terms), await _document_frequency(conn, sid, unique)

    def _newest_postings(self, sid: int, term: str) -> Select[Any]:
        """The term's newest ``term_postings`` postings in the scope."""
        t = memory_term.c
        return (select(t.term, t.memory_id, t.tf, t.doc_len)
                .where(t.scope_id == sid, t.term == term)
                .order_by(t.memory_id.desc()).limit(self.term_postings))

    async def _postings(self, conn: AsyncConnection, sid: int, terms: list[str],
                        ) -> tuple[dict[str, Postings], dict[str, int]]:
        """Each term's newest ``term_postings`` postings, and the document frequency of
        the terms that had more."""
        rows: list[DbRow] = []
        cut: list[str] = []
        for term in dict.fromkeys(terms):
            got = (await conn.execute(self._newest_postings(sid, term))).all()
            rows.extend(got)
            if len(got) >= self.term_postings:
                cut.append(term)
        return postings_of(rows, terms), await _document_frequency(conn, sid, cut)

    @staticmethod
    async def _rows(conn: AsyncConnection, sid: int, tenant: str, ids: list[int],
                    ) -> list[DbRow]:
        m = memory.c
        out: list[DbRow] = []
        for i in range(0, len(ids), _CHUNK):
            out.extend((await conn.execute(select(memory).where(
                m.tenant_id == tenant, m.scope_id == sid, m.id.in_(ids[i:i + _CHUNK]),
                m.valid_to.is_(None)))).all())
        return out

    @staticmethod
    async def _neighbours(conn: AsyncConnection, sid: int, tenant: str,
                          slots: list[tuple[str, int]]) -> list[DbRow]:
        m = memory.c
        out: list[DbRow] = []
        for i in range(0, len(slots), _CHUNK):
            out.extend((await conn.execute(select(memory).where(
                m.tenant_id == tenant, m.scope_id == sid, m.valid_to.is_(None),
                tuple_(m.session_key, m.seq).in_(slots[i:i + _CHUNK])))).all())
        return out

    async def _vectors(self, conn: AsyncConnection, sid: int, st: ScopeState,
                       known: dict[int, bytes]) -> None:
        """The vectors of the memories ``st`` holds (``known`` ones not read again)."""
        assert self.model is not None
        e = memory_embedding.c
        ids = sorted(int(k) for k in st.positions)
        missing = [i for i in ids if i not in known]
        for i in range(0, len(missing), _CHUNK):
            known.update({int(r.memory_id): r.vector for r in await conn.execute(
                select(e.memory_id, e.vector).where(
                    e.scope_id == sid, e.model == self.model[0],
                    e.memory_id.in_(missing[i:i + _CHUNK])))})
        have = [i for i in ids if i in known]
        if have:
            st.add_vectors([str(i) for i in have], self._matrix([known[i] for i in have]))

    def _matrix(self, blobs: list[bytes]) -> Vector:
        assert self.model is not None
        return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(
            len(blobs), self.model[1])
