"""Search of the built-in provider: from a query to ranked memories.

Per search: the readable scopes' statistics rows, their states from the
scope cache (:mod:`.scope_cache`; refreshed when a write bumped a version),
the postings of the query's terms the states do not hold yet, then BM25 and
cosine as arrays over the scopes. The fusion (:func:`streams.memory.rules.fusion.fuse`)
only ever looks at each signal's best ``candidates`` and their session
neighbours, plus each signal's range for the min-max normalisation, so only
those go into it: the result is the one ``fuse`` gives on the whole signals,
at a cost that follows the candidates. Finally the rows of the chosen
memories, from the row cache or by primary key.

No connection is held while waiting for anything but the database: the query
vector is awaited between the reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import ColumnElement, Select, and_, bindparam, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from streams.adapters.db.schema.memory import (
    SHOWN_COLUMNS,
    TERM_MAX_CHARS,
    memory,
    memory_scope_stats,
    memory_term,
)
from streams.memory.model import StoredMemory, by_score
from streams.memory.provider import Scope, SearchRequest
from streams.memory.providers.builtin.held_places import HeldPlaces
from streams.memory.providers.builtin.held_reads import HeldReads
from streams.memory.providers.builtin.row_cache import MemoryCache, memory_of
from streams.memory.providers.builtin.rows import DbRow, Vector, stored
from streams.memory.providers.builtin.scope_cache import ScopeCache
from streams.memory.providers.builtin.scope_state import (
    Floats,
    Ids,
    Postings,
    ScopeState,
    is_subject,
    postings_of,
)
from streams.memory.providers.builtin.unheld import UnheldReads
from streams.memory.rules.fusion import FusionWeights, Ramp, confidence, fuse_arrays
from streams.memory.rules.lexical import (
    bm25_arrays,
    holds_specific,
    idf,
    matched_share,
    query_terms,
)
from streams.memory.rules.mmr import Similarities, cosine_matrix, jaccard_of_words, mmr_order
from streams.memory.rules.recency import Recency, newer_first
from streams.memory.rules.shown_score import shown_scores
from streams.memory.rules.strength import strongest_first

_NO_IDS: Ids = np.zeros(0, dtype=np.int64)
KindMask = Callable[[Ids], npt.NDArray[np.bool_]]  # which of some memory ids to keep
PACKED_SPAN = 16  # member_of: ids spanning less than 16 times their number use a table
KIND_CANDIDATES_PER_HIT = 10  # a search of some kinds of a scope not held: rows read a hit


class Signal:
    """One signal's scores over the searched scopes, in the order ``fuse`` would see them.
    Its work is numpy's, linear in the entries at most: no Python loop over them."""

    def __init__(self, ids: Ids, values: Floats) -> None:
        self.ids = ids
        self.values = values

    def __len__(self) -> int:
        return len(self.ids)

    def only(self, keep: KindMask) -> Signal:
        """The entries whose ids ``keep`` accepts."""
        mask = keep(self.ids)
        return self if mask.all() else Signal(self.ids[mask], self.values[mask])

    def top(self, n: int) -> Ids:
        """The ids of the best ``n`` after min-max normalisation (ties in the signal's
        order): the ``n`` best by a partial selection, then only those, and the ties at
        the cut, sorted."""
        if len(self) <= n:
            return self.ids
        if n <= 0:
            return _NO_IDS
        lo, hi = float(self.values.min()), float(self.values.max())
        norm = ((self.values - lo) / (hi - lo) if hi - lo > 1e-12
                else np.ones_like(self.values))
        cut = np.partition(norm, len(norm) - n)[len(norm) - n]
        near = np.flatnonzero(norm >= cut)  # the n best and any tied with the n-th
        best = near[np.argsort(-norm[near], kind="stable")[:n]]
        return self.ids[best]

    def restricted(self, keep: Ids) -> tuple[Ids, Floats]:
        """The entries of ``keep``, plus the lowest and highest (the normalisation range),
        in the signal's order."""
        if not len(self):
            return self.ids, self.values
        mask = member_of(self.ids, keep)
        mask[np.argmin(self.values)] = mask[np.argmax(self.values)] = True
        return self.ids[mask], self.values[mask]


class NearSignal(Signal):
    """The dense signal of a scope with a graph (:mod:`.ann`): the graph proposes the
    best ``k`` and the farthest memory, the scope's vectors give their exact cosines,
    and any other memory asked for (a lexical candidate, a neighbour) gets its exact
    cosine too. Only memories the scope holds take part."""

    def __init__(self, st: ScopeState, qvec: Vector, k: int) -> None:
        assert st.ann is not None
        self.st = st
        self.qvec = qvec
        found = np.unique(np.concatenate([st.ann.nearest(qvec, k), st.ann.farthest(qvec)]))
        found = found[member_of(found, st.vec_ids, ascending=True)]  # held: valid
        super().__init__(found, self.cosines(found))

    def cosines(self, ids: Ids) -> Floats:
        rows = [self.st.vec_index[str(i)] for i in ids.tolist()]
        return np.asarray(self.st.matrix[rows] @ self.qvec, dtype=np.float64)

    def only(self, keep: KindMask) -> Signal:
        """The exact signal of every held memory ``keep`` accepts: what the graph
        proposed for the whole scope says nothing of the best of a subset."""
        everything = Signal(self.st.vec_ids, (self.st.matrix @ self.qvec).astype(np.float64))
        return everything.only(keep)

    def restricted(self, keep: Ids) -> tuple[Ids, Floats]:
        wanted = keep[member_of(keep, self.st.vec_ids, ascending=True)]
        extra = np.setdiff1d(wanted, self.ids)
        if len(extra):
            return Signal(np.concatenate([self.ids, extra]),
                          np.concatenate([self.values, self.cosines(extra)])).restricted(keep)
        return super().restricted(keep)


class Search:
    def __init__(self, engine: AsyncEngine, cache: ScopeCache, rows: MemoryCache, *,
                 weights: FusionWeights, candidates: int, mmr_lambda: float,
                 ramp: Ramp | None = None, recency: Recency | None = None,
                 held: HeldReads | None = None, unheld: UnheldReads | None = None) -> None:
        """``unheld``: how a scope too large to hold (:meth:`ScopeCache.too_large`) is
        read per query (default: :class:`.unheld.UnheldReads` of the cache's model)."""
        self.engine = engine
        self.unheld = unheld
        self.held = held
        self.cache = cache
        self.memories = rows
        self.weights = weights
        self.candidates = candidates
        self.mmr_lambda = mmr_lambda
        self.ramp = ramp
        self.recency = recency

    async def run(self, scope: Scope, request: SearchRequest, pairs: set[tuple[str, str]],
                  qvec: asyncio.Future[Vector] | None) -> list[StoredMemory]:
        """With the scopes held and current (their versions read on the held connection,
        :mod:`.held_reads`), no other read but of rows not held. Otherwise, lexical
        only, one connection does it all; with a query vector to wait for, the
        connection goes back to the pool before the wait. A stale scope is refreshed
        with no connection held by this search (:meth:`ScopeCache.fresh`)."""
        terms = search_terms(request)
        states: list[ScopeState] = []
        since = self.memories.generation  # before this search's reads begin
        held_since = self.cache.generation
        read = (await self.held.rows(_versions_query(len(pairs)), _stats_params(scope, pairs))
                if self.held is not None else None)
        if read is not None:
            if not read:
                return []
            held = [st for s in read if (st := self.cache.current(s)) is not None]
            if len(held) == len(read):
                postings, missing = _held_postings(held, terms)
                if not missing:
                    return await self._rank(None, scope, request, read, held, postings, terms,
                                            None if qvec is None else await qvec, since)
        async with self.engine.connect() as conn:
            stats = await self._stats(conn, scope, pairs)
            if not stats:
                return []
            over = {int(s.id) for s in stats if self.cache.too_large(s)}
            for s in stats if not over else ():
                if (st := await self.cache.fresh_on(conn, s, held_since)) is None:
                    break  # not held, or being refreshed: wait below, connection back
                states.append(st)
            if len(states) == len(stats):
                versions = {int(s.id): int(s.version) for s in stats}
                postings = await self._terms(conn, states, terms, versions)
                if qvec is None:
                    return await self._rank(conn, scope, request, stats, states, postings, terms,
                                            None, since)
        if over:
            return await self._partly_held(scope, request, stats, over, terms, qvec, since)
        if len(states) < len(stats):
            states = list(await asyncio.gather(*(self.cache.fresh(s) for s in stats)))
            async with self.engine.connect() as conn:
                postings = await self._terms(conn, states, terms, None)
                if qvec is None:
                    return await self._rank(conn, scope, request, stats, states, postings, terms,
                                            None, since)
        assert qvec is not None
        return await self._rank(None, scope, request, stats, states, postings, terms,
                                await qvec, since)

    async def _partly_held(self, scope: Scope, request: SearchRequest, stats: list[DbRow],
                           over: set[int], terms: list[str],
                           qvec: asyncio.Future[Vector] | None, since: int,
                           ) -> list[StoredMemory]:
        """A search of some scopes too large to hold: the others held as ever (no
        connection held meanwhile), the query vector awaited, then one connection reads
        the large ones' parts (:mod:`.unheld`), the held ones' missing postings and the
        rows. A search of some kinds (a conflict check, a few results) reads the rows of
        each signal's best ``KIND_CANDIDATES_PER_HIT`` per result asked for (its
        preferences' too), at most ``candidates``."""
        small = [s for s in stats if int(s.id) not in over]
        held = dict(zip([int(s.id) for s in small],
                        await asyncio.gather(*(self.cache.fresh(s) for s in small)),
                        strict=True))
        vec = None if qvec is None else await qvec
        reads = self.unheld if self.unheld is not None else UnheldReads(self.cache.model)
        async with self.engine.connect() as conn:
            postings = await self._terms(conn, list(held.values()), terms, None)
            asked = request.top_k + (request.pref_top_k if request.include_preference else 0)
            wide = (self.candidates if request.kinds is None
                    else min(self.candidates, KIND_CANDIDATES_PER_HIT * asked))
            parts = {int(s.id): await reads.read(conn, s, scope.tenant_id, terms, vec, wide,
                                                 request.kinds)
                     for s in stats if int(s.id) in over}
            for sid, part in parts.items():
                postings[sid] = part.postings
            states = [held[sid] if sid in held else parts[sid].state
                      for sid in (int(s.id) for s in stats)]
            lexical = {sid: Signal(*part.lexical) for sid, part in parts.items()}
            return await self._rank(conn, scope, request, stats, states, postings, terms, vec,
                                    since, lexical)

    async def _rank(self, conn: AsyncConnection | None, scope: Scope, request: SearchRequest,
                    stats: list[DbRow], states: list[ScopeState],
                    postings: dict[int, dict[str, Postings]], terms: list[str],
                    qvec: Vector | None, since: int,
                    lexical: dict[int, Signal] | None = None) -> list[StoredMemory]:
        """Each scope ranked on its own (its best hit scores 1.0): a user's many memories
        never push the agent's few out of a search of both cubes. One read of the rows
        (the memory cache's generation ``since`` when the search's reads began).
        ``lexical``: the lexical signal of a scope not held, by scope id."""
        given = lexical or {}
        ranked = [self._scored(request, st, postings, terms, qvec, given.get(st.scope_id))
                  for st in states]
        return await self._choose(conn, scope, request, [int(s.id) for s in stats], states,
                                  ranked, since)

    def _scored(self, request: SearchRequest, st: ScopeState,
                postings: dict[int, dict[str, Postings]], terms: list[str],
                qvec: Vector | None, given: Signal | None = None) -> tuple[Ids, Floats]:
        """One scope's fused scores, as ``(ids, scores)`` (``given``: its lexical signal,
        when it was not computed from the scope's postings)."""
        states = [st]
        lexical = given if given is not None else self._lexical(states, postings, terms)
        dense = None
        if qvec is not None:  # a graph proposes for large scopes (kinds: all scanned, .only)
            dense = (NearSignal(st, qvec, self.candidates) if st.ann is not None
                     else self._dense(states, qvec))
        if request.kinds is not None:
            wanted = of_kinds(states, request.kinds)
            lexical = lexical.only(wanted)
            dense = dense.only(wanted) if dense is not None else None
        best = lexical.top(self.candidates)
        if dense is not None:
            best = np.concatenate([best, dense.top(self.candidates)])
        keep = around(st, best)
        if request.kinds is not None:
            keep = keep[wanted(keep)]
        ids, scores = fuse_arrays(
            lexical.restricted(keep), dense.restricted(keep) if dense else None,  # (empty: none)
            st.places.places(keep), query=request.query, weights=self.weights,
            limit=self.candidates,
            top_score=self._confidence(request, st, postings, terms, lexical, dense))
        if self.recency is None or request.kinds is not None:
            return ids, scores
        return ids, self._newer_first(st, ids, scores, postings.get(st.scope_id, {}), terms,
                                      self.recency, request.relativity)

    @staticmethod
    def _newer_first(st: ScopeState, ids: Ids, scores: Floats, postings: dict[str, Postings],
                     terms: list[str], rule: Recency, floor: float) -> Floats:
        """:func:`~streams.memory.rules.recency.newer_first` over the ``rule.depth`` best
        over ``floor`` (the search's relativity: the pool keeps its members), with the
        query's words each of them holds (from the postings)."""
        words = [t for t in terms if not is_subject(t)]
        if rule.depth < 2 or not words or len(ids) < 2:
            return scores
        top = np.argsort(-scores, kind="stable")[:rule.depth]
        at = st.places.rows(ids[top])
        matched = np.zeros((len(top), len(words)), dtype=bool)
        for k, t in enumerate(words):
            if (p := postings.get(t)) is not None and len(p[0]):
                matched[:, k] = member_of(ids[top], p[0], ascending=True)
        weights = np.array([idf(st.doc_count, len(p[0]) if (p := postings.get(t)) is not None
                                else 0) for t in words], dtype=np.float64)
        places, held = st.places, at >= 0  # every fused memory is held; a guard all the same
        out = scores.copy()
        out[top] = newer_first(scores[top], np.where(held, places.time[at], np.nan),
                               places.changed[at] & held, np.where(held, places.values[at], 0),
                               matched, weights, rule, floor=floor)
        return out

    def _confidence(self, request: SearchRequest, st: ScopeState,
                    postings: dict[int, dict[str, Postings]], terms: list[str],
                    lexical: Signal, dense: Signal | None) -> float:
        """The scope's :func:`~streams.memory.rules.fusion.confidence` for the query (1.0 for
        searches of some kinds only: a consolidation's lookups want whatever is related)."""
        if self.ramp is None or request.kinds is not None:
            return 1.0
        share, specific = 0.0, False
        if len(lexical):
            best = np.array([lexical.ids[int(np.argmax(lexical.values))]], dtype=np.int64)
            held = postings.get(st.scope_id, {})
            words = [t for t in dict.fromkeys(terms) if not is_subject(t)]
            holds = [(p := held.get(t)) is not None
                     and bool(member_of(best, p[0], ascending=True)[0]) for t in words]
            share, specific = matched_share(holds), holds_specific(words, holds)
        dense_best = float(dense.values.max()) if dense is not None and len(dense) else None
        return confidence(dense_best, share, self.ramp, specific=specific)

    @staticmethod
    async def _stats(conn: AsyncConnection, scope: Scope,
                     pairs: set[tuple[str, str]]) -> list[DbRow]:
        return list((await conn.execute(_stats_query(len(pairs)),
                                        _stats_params(scope, pairs))).all())

    async def _terms(self, conn: AsyncConnection, states: list[ScopeState], terms: list[str],
                     versions: dict[int, int] | None) -> dict[int, dict[str, Postings]]:
        """Each state's postings of ``terms``: a state holds those of every word of its
        memories; subject terms it does not hold yet are read (and held when read at
        the state's version)."""
        out, missing = _held_postings(states, terms)
        if not missing:
            return out
        t = memory_term.c
        q = select(t.scope_id, t.term, t.memory_id, t.tf, t.doc_len).where(or_(*(
            and_(t.scope_id == sid, t.term.in_(ts)) for sid, ts in sorted(missing.items()))))
        rows = (await conn.execute(q)).all()
        if versions is None or not await self.cache.snapshot_reads(conn):
            s = memory_scope_stats.c
            versions = {int(r.id): int(r.version) for r in await conn.execute(
                select(s.id, s.version).where(s.id.in_(sorted(missing))))}
        by_scope: dict[int, list[DbRow]] = {sid: [] for sid in missing}
        for r in rows:
            by_scope[int(r.scope_id)].append(r)
        for st in states:
            if st.scope_id in missing:
                loaded = postings_of(by_scope[st.scope_id], missing[st.scope_id])
                out[st.scope_id].update(loaded)
                self.cache.keep_terms(st, versions.get(st.scope_id, -1), loaded)
        return out

    @staticmethod
    def _lexical(states: list[ScopeState], postings: dict[int, dict[str, Postings]],
                 terms: list[str]) -> Signal:
        ids: list[Ids] = []
        parts: list[Floats] = []
        for st in states:
            if st.doc_count <= 0:
                continue
            held = all(st.terms.get(t) is postings[st.scope_id].get(t) for t in terms)
            got, scores = bm25_arrays(terms, postings.get(st.scope_id, {}), st.doc_count,
                                      float(st.total_len) / max(st.doc_count, 1),
                                      kept=st.bm25_parts if held else None)
            if not held:  # postings read at another version than the state's
                known = np.array([str(i) in st.positions for i in got.tolist()], dtype=bool)
                got, scores = got[known], scores[known]
            ids.append(got)
            parts.append(scores)
        if not ids:
            return Signal(np.zeros(0, dtype=np.int64), np.zeros(0))
        return Signal(np.concatenate(ids), np.concatenate(parts))

    @staticmethod
    def _dense(states: list[ScopeState], qvec: Vector) -> Signal:
        ids: list[Ids] = []
        parts: list[Floats] = []
        for st in states:
            if st.vec_keys:
                ids.append(st.vec_ids)
                parts.append((st.matrix @ qvec).astype(np.float64))
        if not ids:
            return Signal(np.zeros(0, dtype=np.int64), np.zeros(0))
        return Signal(np.concatenate(ids), np.concatenate(parts))

    async def _choose(self, conn: AsyncConnection | None, scope: Scope, request: SearchRequest,
                      scope_ids: list[int], states: list[ScopeState],
                      ranked: list[tuple[Ids, Floats]], since: int) -> list[StoredMemory]:
        """Each scope's pools' picks (MMR on the vectors, or on the word sets when a
        memory has no vector, both held by the scope state), as memories with their
        scores, best first: only the picks' rows are read."""
        picked: list[tuple[Ids, Floats]] = [
            self._picks(request, st, pool, values, limit, at)
            for st, (ids, scores) in zip(states, ranked, strict=True)
            for pool, values, limit, at in pools_of(request, ids, scores, st.places)]
        if not picked:
            return []
        keys: list[int] = np.concatenate([k for k, _ in picked]).tolist()
        shown = shown_scores(np.concatenate([v for _, v in picked]))
        found = await self._memories(conn, scope, scope_ids, keys, since)
        out = [memory_of(row, str(k), score) for k, score in zip(keys, shown, strict=True)
               if (row := found.get(k)) is not None]
        return sorted(out, key=by_score, reverse=True)

    async def strongest(self, scope: Scope, request: SearchRequest,
                        pairs: set[tuple[str, str]]) -> list[StoredMemory]:
        """Each scope's strongest valid memories (:mod:`~streams.memory.rules.strength`):
        facts, then episodes, each kind read in the database's order of importance and
        time, at most ``top_k`` per scope. The scope's rows are read (no index orders
        them): the cost follows the scope's size, for queries that name nothing."""
        m = memory.c
        out: list[StoredMemory] = []
        async with self.engine.connect() as conn:
            for sid in [int(s.id) for s in await self._stats(conn, scope, pairs)]:
                mine: list[StoredMemory] = []
                for kind in ("fact", "episode"):
                    room = request.top_k - len(mine)
                    if room <= 0 or (request.kinds is not None and kind not in request.kinds):
                        continue
                    q = (select(*SHOWN_COLUMNS).where(
                        m.tenant_id == scope.tenant_id, m.scope_id == sid, m.valid_to.is_(None),
                        (m.kind == "episode") if kind == "episode" else (m.kind != "episode"))
                        .order_by(m.importance.desc(), m.event_time.desc(), m.id.desc())
                        .limit(room))
                    mine += [stored(r, 0.0) for r in await conn.execute(q)]
                out += strongest_first(mine)
        return sorted(out, key=by_score, reverse=True)

    def _picks(self, request: SearchRequest, st: ScopeState, ids: Ids, scores: Floats,
               limit: int, at: Ids) -> tuple[Ids, Floats]:
        """The ids and scores of the pool's picks (held memories, at rows ``at`` of the
        scope's places), in order."""
        if not request.dedup or not len(ids):
            return ids[:limit], scores[:limit]
        rows = [st.vec_index.get(str(k), -1) for k in ids.tolist()] if st.vec_keys else []
        matrix: Similarities
        if rows and -1 not in rows:  # -1: no vector
            matrix = cosine_matrix(st.matrix[rows])
        else:
            matrix = jaccard_of_words(st.places.words_of(at), st.places.word_count[at])
        order = mmr_order(scores, matrix, limit, lambda_=self.mmr_lambda)
        return ids[order], scores[order]

    async def _memories(self, conn: AsyncConnection | None, scope: Scope, scope_ids: list[int],
                        keys: list[int], since: int) -> dict[int, tuple[Any, ...]]:
        """The memories of ``keys`` (held ones, the others read on ``conn`` or a new one)."""
        m = memory.c

        async def load(ids: list[int]) -> Sequence[DbRow]:
            q = select(*SHOWN_COLUMNS).where(
                m.tenant_id == scope.tenant_id, m.scope_id.in_(scope_ids),
                m.id.in_(sorted(ids)), m.valid_to.is_(None))
            if conn is not None:
                return list((await conn.execute(q)).all())
            async with self.engine.connect() as own:
                return list((await own.execute(q)).all())

        if not keys:
            return {}
        return await self.memories.get(keys, load, since)


def around(st: ScopeState, best: Ids) -> Ids:
    """``best`` and their session neighbours, of the memories the scope holds, ascending."""
    places, slots = st.places, st.slots
    at = places.rows(best)
    held = best[at >= 0]
    at = at[at >= 0]
    names = places.session_names
    near = [int(n) for s, q in zip(places.session[at].tolist(), places.seq[at].tolist(),
                                   strict=True) if s >= 0
            for d in (-1, 1) if (n := slots.get((names[s], q + d))) is not None]
    return np.unique(np.concatenate([held, np.array(near, dtype=np.int64)]))


def member_of(ids: Ids, wanted: Ids, *, ascending: bool = False) -> npt.NDArray[np.bool_]:
    """``np.isin(ids, wanted)`` without sorting both together: through a table of the ids'
    span when they are packed closely (a scope's memories mostly are), else by a binary
    search of each id in ``wanted`` sorted (already, when ``ascending``). Either is
    cheaper for a few ``wanted`` among many ids, or a few ids in many ``wanted``."""
    if not len(wanted) or not len(ids):
        return np.zeros(len(ids), dtype=bool)
    lo, hi = int(ids.min()), int(ids.max())
    if hi - lo < PACKED_SPAN * len(ids):
        table = np.zeros(hi - lo + 1, dtype=bool)
        table[wanted[(wanted >= lo) & (wanted <= hi)] - lo] = True
        return table[ids - lo]
    if not ascending:
        wanted = np.sort(wanted)
    at = np.minimum(np.searchsorted(wanted, ids), len(wanted) - 1)
    return np.asarray(wanted[at] == ids)


def search_terms(request: SearchRequest) -> list[str]:
    """The query's own terms, then the subject terms it asks for (index terms as written)."""
    words = (t[:TERM_MAX_CHARS] for t in query_terms(request.query))
    return list(dict.fromkeys([*words, *(s[:TERM_MAX_CHARS] for s in request.subjects)]))


def of_kinds(states: list[ScopeState], kinds: Sequence[str]) -> KindMask:
    """Which of some ids of these scopes' memories are of one of ``kinds`` (an id that
    is no scope's episode is a fact), as a mask: numpy's work, no Python per id."""
    want_facts, want_episodes = "fact" in kinds, "episode" in kinds
    episodes = [st.episode_ids() for st in states]

    def mask(ids: Ids) -> npt.NDArray[np.bool_]:
        episode = np.zeros(len(ids), dtype=bool)
        for e in episodes:
            episode |= member_of(ids, e, ascending=True)
        return np.where(episode, want_episodes, want_facts)

    return mask


def pools_of(request: SearchRequest, ids: Ids, scores: Floats, places: HeldPlaces,
             ) -> list[tuple[Ids, Floats, int, Ids]]:
    """The best held memories above ``relativity`` as ``(ids, scores, picks, rows)``
    (``rows``: theirs in ``places``): general memories for ``top_k`` and, when asked,
    preferences for ``pref_top_k``; each with headroom for MMR. Ties keep the scores'
    order."""
    at = places.rows(ids)
    rows = np.flatnonzero((scores >= request.relativity) & (at >= 0))
    ranked = rows[np.argsort(-scores[rows], kind="stable")]
    preference = places.preference[at[ranked]]
    wanted = {False: request.top_k, True: request.pref_top_k if request.include_preference else 0}
    out: list[tuple[Ids, Floats, int, Ids]] = []
    for pref, n in wanted.items():
        if n > 0:
            pool = ranked[preference == pref][:max(3 * n, n + 20)]
            out.append((ids[pool], scores[pool], n, at[pool]))
    return out


def _held_postings(states: list[ScopeState], terms: list[str],
                   ) -> tuple[dict[int, dict[str, Postings]], dict[int, list[str]]]:
    """Each state's postings of ``terms`` it holds, and the subject terms it does not
    hold yet (by scope, where any)."""
    out = {st.scope_id: {t: p for t in terms if (p := st.postings_of(t)) is not None}
           for st in states}
    missing = {st.scope_id: [t for t in terms if t not in st.terms and is_subject(t)]
               for st in states if st.doc_count > 0}
    return out, {sid: ts for sid, ts in missing.items() if ts}


def _stats_params(scope: Scope, pairs: set[tuple[str, str]]) -> dict[str, str]:
    """The parameters of :func:`_stats_query` for ``pairs``."""
    params: dict[str, str] = {"tenant": scope.tenant_id}
    for i, (cube, owner) in enumerate(sorted(pairs)):
        params[f"cube{i}"], params[f"owner{i}"] = cube, owner
    return params


def _of_pairs(pairs: int) -> ColumnElement[bool]:
    """A tenant's ``pairs`` (cube, owner) scopes (parameters ``tenant``, ``cube{i}``,
    ``owner{i}``)."""
    s = memory_scope_stats.c
    return and_(s.tenant_id == bindparam("tenant"), or_(*(
        and_(s.cube == bindparam(f"cube{i}"), s.owner_id == bindparam(f"owner{i}"))
        for i in range(pairs))))


@lru_cache(maxsize=8)
def _stats_query(pairs: int) -> Select[Any]:
    """The statistics rows of a tenant's ``pairs`` scopes, built once per number of
    pairs."""
    return select(memory_scope_stats).where(_of_pairs(pairs))


@lru_cache(maxsize=8)
def _versions_query(pairs: int) -> Select[Any]:
    """Their ids and versions only: all a search of held scopes reads (:mod:`.held_reads`
    reads it on the driver's connection, its columns needing no conversion)."""
    s = memory_scope_stats.c
    return select(s.id, s.version).where(_of_pairs(pairs))
