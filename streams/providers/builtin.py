"""The built-in long-term memory provider: MySQL (or SQLite) with hybrid retrieval.

Writes (:meth:`BuiltinProvider.add`) store the memory rows, their postings in
the inverted index, their vectors and the scope's statistics in one
transaction; the same content from the same source events is stored once.
:meth:`~BuiltinProvider.expire` never deletes a memory: it sets ``valid_to``
and ``superseded_by`` and takes the memory out of the index.

A search costs the same whatever the tenant holds elsewhere: it reads the
scope's statistics row, the postings of the query's own terms in the
readable scopes, and the candidate rows by primary key. Dense similarity runs
over the scope's vectors held in memory, reloaded only when the scope's
version changed. Ranking is :mod:`streams.domain.fusion` and
:mod:`streams.domain.mmr`, the code the offline LoCoMo evaluation measures.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, cast

import numpy as np
import numpy.typing as npt
from sqlalchemy import and_, bindparam, func, or_, select, update
from sqlalchemy.engine import Row
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from streams.db.engine import insert_ignoring_duplicates
from streams.db.memory_schema import (
    TERM_MAX_CHARS,
    memory,
    memory_embedding,
    memory_scope_stats,
    memory_term,
)
from streams.domain.fusion import FusionWeights, Position, fuse, speaker_of, top_n
from streams.domain.lexical import bm25, query_terms, term_counts, tokenize
from streams.domain.memory import USER_CUBE, MemoryCandidate, StoredMemory, agent_cube
from streams.domain.mmr import Scored, mmr
from streams.embeddings import Embedder, EmbedderError
from streams.providers.base import (
    PermanentProviderError,
    ProviderError,
    RetryableProviderError,
    Scope,
    SearchRequest,
    WriteResult,
)

Vector = npt.NDArray[np.float32]
_RETRYABLE_MYSQL = {1040, 1205, 1213, 2002, 2003, 2006, 2013, 2055}


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _naive(ts: datetime | None) -> datetime | None:
    return ts.astimezone(UTC).replace(tzinfo=None) if ts and ts.tzinfo else ts


def content_hash(c: MemoryCandidate) -> str:
    """Identity of a memory: its kind, text and source events."""
    key = "\x1f".join([c.kind, c.content, "\x1e".join(sorted(c.source_event_ids))])
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass
class _Prepared:
    candidate: MemoryCandidate
    hash: str
    terms: dict[str, int]
    doc_len: int
    session: str | None = None
    seq: int = 0


@dataclass
class _ScopeVectors:
    """A scope's valid memories in memory: vectors and positions, at one version."""

    version: int
    ids: list[str]
    matrix: Vector
    positions: dict[str, Position]
    slots: dict[tuple[str, int], str]
    index: dict[str, int]
    types: dict[str, str]


class BuiltinProvider:
    """Long-term memories in the service's own database (MySQL or SQLite)."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        embedder: Embedder | None = None,
        name: str = "mysql",
        weights: FusionWeights = FusionWeights(),  # noqa: B008 - frozen
        candidates: int = 200,
        mmr_lambda: float = 0.7,
        vector_cache_rows: int = 200_000,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self.engine = engine
        self.embedder = embedder if embedder is not None and embedder.dim > 0 else None
        self.name = name
        self.weights = weights
        self.candidates = candidates
        self.mmr_lambda = mmr_lambda
        self.vector_cache_rows = vector_cache_rows
        self._clock = clock
        self._vectors: dict[int, _ScopeVectors] = {}
        self._loading: dict[int, asyncio.Lock] = {}

    # ---------------------------------------------------------------- scoping
    def _check(self, scope: Scope, operation: str) -> None:
        """Ids are compared exactly; MySQL ignores trailing spaces, so they are refused."""
        for value in (scope.tenant_id, scope.user_id, scope.agent_id):
            if not value or value != value.strip():
                raise PermanentProviderError(
                    f"scope ids must be non-empty without surrounding spaces: {scope!r}",
                    provider=self.name, operation=operation)

    @staticmethod
    def owner_of(scope: Scope, cube: str) -> str | None:
        """The owner key of ``cube`` for this caller, or None when it may not use it.

        ``user_profile`` belongs to the user (across agents); ``agent_{id}``
        to the agent (across its users), and only that agent may use it.
        """
        if cube == USER_CUBE:
            return scope.user_id
        if cube == agent_cube(scope.agent_id):
            return ""
        return None

    def _owner_or_fail(self, scope: Scope, cube: str, operation: str) -> str:
        self._check(scope, operation)
        owner = self.owner_of(scope, cube)
        if owner is None:
            raise PermanentProviderError(
                f"cube {cube!r} is not writable for agent {scope.agent_id!r}",
                provider=self.name, operation=operation)
        return owner

    def _error(self, exc: BaseException, operation: str) -> ProviderError:
        return classify_db_error(exc, provider=self.name, operation=operation)

    # ------------------------------------------------------------------ write
    async def add(
        self, scope: Scope, cube: str, memories: Sequence[MemoryCandidate],
        *, session_key: str | None = None,
    ) -> WriteResult:
        """Store ``memories``; ids in the order given (a repeated memory gets its stored id).

        Episodic memories of one call form one session (for neighbour
        smoothing) unless ``session_key`` names it; facts join a session only
        when ``session_key`` is given.
        """
        owner = self._owner_or_fail(scope, cube, "add")
        prepared = self._prepare(memories, session_key)
        if not prepared:
            return WriteResult([])
        unique = list({p.hash: p for p in prepared}.values())
        try:
            known = await self._ids_by_hash_outside(scope, cube, owner, [p.hash for p in unique])
            fresh = [p for p in unique if p.hash not in known]
            vectors: dict[str, bytes] = {}
            if self.embedder is not None and fresh:
                embedded = await self._embed([p.candidate.content for p in fresh])
                vectors = {p.hash: np.asarray(v, dtype=np.float32).tobytes()
                            for p, v in zip(fresh, embedded, strict=True)}
            async with self.engine.begin() as conn:
                scope_id = await self._lock_scope(conn, scope, cube, owner)
                known = await self._ids_by_hash(conn, scope_id, [p.hash for p in unique])
                new = [p for p in unique if p.hash not in known]
                if new:
                    known.update(await self._insert(conn, scope, cube, scope_id, new, vectors))
        except (TimeoutError, SQLAlchemyError, OSError) as exc:
            raise self._error(exc, "add") from exc
        return WriteResult([known[p.hash] for p in prepared])

    def _prepare(self, memories: Sequence[MemoryCandidate], session_key: str | None,
                 ) -> list[_Prepared]:
        out: list[_Prepared] = []
        episodes = [m for m in memories if m.kind == "episode" and m.content.strip()]
        batch_key = session_key
        if batch_key is None and episodes:
            first = episodes[0].source_event_ids[:1] or (episodes[0].content,)
            batch_key = "batch:" + hashlib.sha1(first[0].encode()).hexdigest()[:20]
        for m in memories:
            if not m.content.strip():
                raise PermanentProviderError("empty memory content", provider=self.name,
                                             operation="add")
            terms = [t[:TERM_MAX_CHARS] for t in tokenize(m.content)]
            session = batch_key if (m.kind == "episode" or session_key) else None
            out.append(_Prepared(m, content_hash(m), term_counts(terms), len(terms), session))
        return out

    async def _ids_by_hash_outside(self, scope: Scope, cube: str, owner: str,
                                   hashes: list[str]) -> dict[str, str]:
        s, m = memory_scope_stats.c, memory.c
        q = (select(m.content_hash, m.id)
             .join(memory_scope_stats, s.id == m.scope_id)
             .where(s.tenant_id == scope.tenant_id, s.cube == cube, s.owner_id == owner,
                    m.content_hash.in_(hashes)))
        async with self.engine.connect() as conn:
            return {r.content_hash: str(r.id) for r in await conn.execute(q)}

    @staticmethod
    async def _ids_by_hash(conn: AsyncConnection, scope_id: int, hashes: list[str],
                           ) -> dict[str, str]:
        m = memory.c
        q = select(m.content_hash, m.id).where(m.scope_id == scope_id, m.content_hash.in_(hashes))
        return {r.content_hash: str(r.id) for r in await conn.execute(q)}

    async def _lock_scope(self, conn: AsyncConnection, scope: Scope, cube: str, owner: str,
                          ) -> int:
        """The scope's id, creating its row; the row stays locked until commit."""
        s = memory_scope_stats.c
        await conn.execute(
            insert_ignoring_duplicates(self.engine, memory_scope_stats,
                                       ["tenant_id", "cube", "owner_id"]),
            {"tenant_id": scope.tenant_id, "cube": cube, "owner_id": owner, "doc_count": 0,
             "total_len": 0, "version": 0, "updated_at": self._clock()})
        q = (select(s.id).where(s.tenant_id == scope.tenant_id, s.cube == cube,
                                s.owner_id == owner).with_for_update())
        return int((await conn.execute(q)).scalar_one())

    async def _insert(self, conn: AsyncConnection, scope: Scope, cube: str, scope_id: int,
                      new: list[_Prepared], vectors: dict[str, bytes]) -> dict[str, str]:
        m = memory.c
        sessions = sorted({p.session for p in new if p.session is not None})
        next_seq: dict[str, int] = {}
        if sessions:
            q = (select(m.session_key, func.max(m.seq)).where(
                m.scope_id == scope_id, m.session_key.in_(sessions)).group_by(m.session_key))
            next_seq = {r[0]: int(r[1]) + 1 for r in await conn.execute(q)}
        for p in sorted(new, key=lambda p: _naive(p.candidate.event_time) or datetime.min):
            if p.session is not None:
                p.seq = next_seq.get(p.session, 0)
                next_seq[p.session] = p.seq + 1
        now = self._clock()
        rows = [{
            "scope_id": scope_id, "tenant_id": scope.tenant_id, "user_id": scope.user_id,
            "agent_id": scope.agent_id, "cube": cube, "type": p.candidate.type,
            "scope": p.candidate.scope, "kind": p.candidate.kind,
            "importance": float(p.candidate.importance), "content": p.candidate.content,
            "source_event_ids": json.dumps(list(p.candidate.source_event_ids)),
            "session_key": p.session, "seq": p.seq, "doc_len": p.doc_len,
            "content_hash": p.hash, "event_time": _naive(p.candidate.event_time),
            "valid_from": _naive(p.candidate.event_time) or now, "valid_to": None,
            "superseded_by": None, "created_at": now, "updated_at": now,
        } for p in new]
        await conn.execute(memory.insert(), rows)
        ids = await self._ids_by_hash(conn, scope_id, [p.hash for p in new])
        postings = [{"scope_id": scope_id, "term": t, "memory_id": int(ids[p.hash]), "tf": tf,
                     "doc_len": p.doc_len} for p in new for t, tf in p.terms.items()]
        if postings:
            await conn.execute(memory_term.insert(), postings)
        if self.embedder is not None:
            vecs = [{"scope_id": scope_id, "model": self.embedder.name,
                     "memory_id": int(ids[p.hash]), "dim": self.embedder.dim,
                     "vector": vectors[p.hash]} for p in new if p.hash in vectors]
            if vecs:
                await conn.execute(*self._vector_insert(vecs))
        s = memory_scope_stats.c
        await conn.execute(update(memory_scope_stats).where(s.id == scope_id).values(
            doc_count=s.doc_count + len(new), total_len=s.total_len + sum(p.doc_len for p in new),
            version=s.version + 1, updated_at=now))
        return ids

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        assert self.embedder is not None
        try:
            return await self.embedder.embed(texts)
        except EmbedderError as exc:
            raise PermanentProviderError(str(exc), provider=self.name, operation="embed") from exc

    def _vector_insert(self, rows: list[dict[str, Any]]) -> tuple[Any, list[dict[str, Any]]]:
        """The INSERT of vector rows. On MySQL the bytes travel as hex and UNHEX() restores
        them: the aiomysql driver cannot bind a bytes parameter with PyMySQL >= 1.2."""
        if self.engine.dialect.name != "mysql":
            return memory_embedding.insert(), rows
        stmt = memory_embedding.insert().values(vector=func.unhex(bindparam("vector_hex")))
        hexed = [{**{k: v for k, v in r.items() if k != "vector"}, "vector_hex": r["vector"].hex()}
                 for r in rows]
        return stmt, hexed

    # ----------------------------------------------------------------- expire
    async def expire(self, scope: Scope, cube: str, memory_ids: Sequence[str],
                     superseded_by: str | None) -> None:
        """Mark memories invalid (``valid_to``, ``superseded_by``) and unindex them.

        Ids that are unknown, already expired or of another scope are ignored,
        so a repeated expiry changes nothing.
        """
        owner = self._owner_or_fail(scope, cube, "expire")
        ids = sorted({int(i) for i in memory_ids if str(i).isdigit()})
        if not ids:
            return
        m = memory.c
        try:
            async with self.engine.begin() as conn:
                scope_id = await self._lock_scope(conn, scope, cube, owner)
                q = select(m.id, m.doc_len).where(m.scope_id == scope_id, m.id.in_(ids),
                                                  m.valid_to.is_(None))
                live = (await conn.execute(q)).all()
                if not live:
                    return
                live_ids = [r.id for r in live]
                now = self._clock()
                await conn.execute(update(memory).where(m.id.in_(live_ids)).values(
                    valid_to=now, superseded_by=superseded_by, updated_at=now))
                t, e = memory_term.c, memory_embedding.c
                await conn.execute(memory_term.delete().where(
                    t.memory_id.in_(live_ids), t.scope_id == scope_id))
                await conn.execute(memory_embedding.delete().where(
                    e.scope_id == scope_id, e.memory_id.in_(live_ids)))
                s = memory_scope_stats.c
                await conn.execute(update(memory_scope_stats).where(s.id == scope_id).values(
                    doc_count=s.doc_count - len(live), version=s.version + 1, updated_at=now,
                    total_len=s.total_len - sum(int(r.doc_len) for r in live)))
        except (TimeoutError, SQLAlchemyError, OSError) as exc:
            raise self._error(exc, "expire") from exc

    # ----------------------------------------------------------------- search
    async def search(self, scope: Scope, request: SearchRequest) -> list[StoredMemory]:
        """Valid memories of the readable cubes among ``request.cubes``, best first."""
        self._check(scope, "search")
        pairs = {(c, o) for c in request.cubes if (o := self.owner_of(scope, c)) is not None}
        if not pairs or not request.query.strip() or request.top_k <= 0:
            return []
        dense_on = self.embedder is not None and not request.keyword_only
        qvec_task = (asyncio.create_task(self._embed([request.query]))
                     if dense_on else None)
        try:
            async with self.engine.connect() as conn:
                stats = await self._stats(conn, scope, pairs)
                lexical = await self._lexical(conn, stats, request.query)
                dense: dict[str, float] | None = None
                positions: dict[str, Position] = {}
                vectors: dict[str, Vector] = {}
                types: dict[str, str] = {}
                if qvec_task is not None:
                    qvec = np.asarray((await qvec_task)[0], dtype=np.float32)
                    dense, positions, vectors, types = await self._dense(
                        conn, stats, qvec, lexical)
                missing = [k for k in top_n(lexical, self.candidates) if k not in positions]
                for r in await self._light(conn, scope, stats, missing):
                    positions[str(r.id)] = Position(r.session_key, int(r.seq), speaker_of(r.head))
                    types[str(r.id)] = r.type
                gone = set(missing) - set(positions)
                lexical = {k: v for k, v in lexical.items() if k not in gone}
                scores = fuse(lexical, dense, positions, query=request.query,
                              weights=self.weights, limit=self.candidates)
                pools = self._pools(request, scores, types)
                rows = await self._rows(conn, scope, stats, {k for ids, _ in pools for k in ids})
        except (TimeoutError, SQLAlchemyError, OSError) as exc:
            raise self._error(exc, "search") from exc
        finally:
            if qvec_task is not None and not qvec_task.done():
                qvec_task.cancel()
        found = {str(r.id): r for r in rows}
        out: list[StoredMemory] = []
        for ids, limit in pools:
            items = [Scored(found[i], scores[i], found[i].content, _as_list(vectors.get(i)))
                     for i in ids if i in found]
            chosen = (mmr(items, limit, lambda_=self.mmr_lambda) if request.dedup
                      else items[:limit])
            out.extend(_stored(it.item, it.score) for it in chosen)
        return sorted(out, key=lambda m: m.score, reverse=True)

    @staticmethod
    def _pools(request: SearchRequest, scores: dict[str, float], types: dict[str, str],
               ) -> list[tuple[list[str], int]]:
        """The best ids above ``relativity``: general memories for ``top_k`` and, when
        asked, preferences for ``pref_top_k``; each with headroom for MMR."""
        ranked = sorted((k for k in scores if k in types and scores[k] >= request.relativity),
                        key=lambda k: scores[k], reverse=True)
        wanted = [(False, request.top_k)]
        if request.include_preference:
            wanted.append((True, request.pref_top_k))
        return [([k for k in ranked if (types[k] == "preference") == pref][: max(3 * n, n + 20)],
                 n) for pref, n in wanted if n > 0]

    async def _stats(self, conn: AsyncConnection, scope: Scope,
                     pairs: set[tuple[str, str]]) -> list[Row[Any]]:
        s = memory_scope_stats.c
        q = select(memory_scope_stats).where(
            s.tenant_id == scope.tenant_id,
            or_(*(and_(s.cube == c, s.owner_id == o) for c, o in sorted(pairs))))
        return list((await conn.execute(q)).all())

    async def _lexical(self, conn: AsyncConnection, stats: list[Row[Any]], query: str,
                       ) -> dict[str, float]:
        terms = list(dict.fromkeys(t[:TERM_MAX_CHARS] for t in query_terms(query)))
        live = [s for s in stats if s.doc_count > 0]
        if not terms or not live:
            return {}
        t = memory_term.c
        q = select(t.scope_id, t.term, t.memory_id, t.tf, t.doc_len).where(
            t.scope_id.in_([s.id for s in live]), t.term.in_(terms))
        postings: dict[int, dict[str, list[tuple[str, int]]]] = {}
        lengths: dict[str, int] = {}
        for r in await conn.execute(q):
            postings.setdefault(r.scope_id, {}).setdefault(r.term, []).append(
                (str(r.memory_id), int(r.tf)))
            lengths[str(r.memory_id)] = int(r.doc_len)
        scores: dict[str, float] = {}
        for s in live:
            if s.id in postings:
                avg = float(s.total_len) / max(int(s.doc_count), 1)
                scores.update(bm25(terms, postings[s.id], lengths, int(s.doc_count), avg))
        return scores

    async def _dense(self, conn: AsyncConnection, stats: list[Row[Any]], qvec: Vector,
                     lexical: dict[str, float],
                     ) -> tuple[dict[str, float], dict[str, Position], dict[str, Vector],
                                dict[str, str]]:
        """Cosine of every valid memory of the scopes, and the positions, vectors and
        types of the candidates: the best of each signal and their session neighbours."""
        sims: dict[str, float] = {}
        loaded: list[_ScopeVectors] = []
        for s in stats:
            sv = await self._scope_vectors(conn, s)
            if sv.ids:
                loaded.append(sv)
                sims.update(zip(sv.ids, (sv.matrix @ qvec).tolist(), strict=True))
        best = set(top_n(sims, self.candidates)) | set(top_n(lexical, self.candidates))
        positions: dict[str, Position] = {}
        vectors: dict[str, Vector] = {}
        types: dict[str, str] = {}
        for sv in loaded:
            keep = {k for k in best if k in sv.index}
            for k in list(keep):
                p = sv.positions[k]
                if p.session is not None:
                    keep.update(n for d in (-1, 1)
                                if (n := sv.slots.get((p.session, p.seq + d))) is not None)
            for k in keep:
                positions[k] = sv.positions[k]
                vectors[k] = sv.matrix[sv.index[k]]
                types[k] = sv.types[k]
        return sims, positions, vectors, types

    async def _scope_vectors(self, conn: AsyncConnection, stats: Row[Any]) -> _ScopeVectors:
        assert self.embedder is not None
        cached = self._vectors.get(int(stats.id))
        if cached is not None and cached.version == int(stats.version):
            return cached
        lock = self._loading.setdefault(int(stats.id), asyncio.Lock())
        async with lock:
            cached = self._vectors.get(int(stats.id))
            if cached is not None and cached.version == int(stats.version):
                return cached
            e, m = memory_embedding.c, memory.c
            q = (select(e.memory_id, e.vector, m.session_key, m.seq, m.type,
                        func.substr(m.content, 1, 80).label("head"))
                 .join(memory, m.id == e.memory_id)
                 .where(e.scope_id == int(stats.id), e.model == self.embedder.name,
                        m.valid_to.is_(None))
                 .order_by(e.memory_id))
            rows = (await conn.execute(q)).all()
            ids = [str(r.memory_id) for r in rows]
            dim = self.embedder.dim
            matrix = (np.frombuffer(b"".join(r.vector for r in rows), dtype=np.float32)
                      .reshape(len(rows), dim) if rows else np.zeros((0, dim), np.float32))
            positions = {str(r.memory_id): Position(r.session_key, int(r.seq),
                                                    speaker_of(r.head)) for r in rows}
            slots = {(p.session, p.seq): k for k, p in positions.items()
                     if p.session is not None}
            sv = _ScopeVectors(int(stats.version), ids, matrix, positions, slots,
                               {k: i for i, k in enumerate(ids)},
                               {str(r.memory_id): str(r.type) for r in rows})
            self._remember(int(stats.id), sv)
            return sv

    def _remember(self, scope_id: int, sv: _ScopeVectors) -> None:
        """Keep ``sv``; forget the least recently loaded scopes beyond the row limit."""
        self._vectors.pop(scope_id, None)
        self._vectors[scope_id] = sv
        total = sum(len(v.ids) for v in self._vectors.values())
        while total > self.vector_cache_rows and len(self._vectors) > 1:
            oldest = next(iter(self._vectors))
            total -= len(self._vectors.pop(oldest).ids)

    async def _light(self, conn: AsyncConnection, scope: Scope, stats: list[Row[Any]],
                     ids: list[str]) -> list[Row[Any]]:
        """Session, order, type and the speaker prefix of valid memories, by id."""
        if not ids or not stats:
            return []
        m = memory.c
        q = select(m.id, m.session_key, m.seq, m.type,
                   func.substr(m.content, 1, 80).label("head")).where(
            m.tenant_id == scope.tenant_id, m.scope_id.in_([s.id for s in stats]),
            m.id.in_(sorted(int(i) for i in ids)), m.valid_to.is_(None))
        return cast(list[Row[Any]], list((await conn.execute(q)).all()))

    async def _rows(self, conn: AsyncConnection, scope: Scope, stats: list[Row[Any]],
                    ids: set[str]) -> list[Row[Any]]:
        if not ids or not stats:
            return []
        m = memory.c
        q = select(memory).where(
            m.tenant_id == scope.tenant_id, m.scope_id.in_([s.id for s in stats]),
            m.id.in_(sorted(int(i) for i in ids)), m.valid_to.is_(None))
        return list((await conn.execute(q)).all())

    # ---------------------------------------------------------------- reading
    async def get(self, scope: Scope, ids: Sequence[str]) -> list[StoredMemory]:
        """Memories by id within the caller's readable cubes, expired ones included."""
        self._check(scope, "get")
        wanted = sorted({int(i) for i in ids if str(i).isdigit()})
        if not wanted:
            return []
        m, s = memory.c, memory_scope_stats.c
        readable = [(USER_CUBE, scope.user_id), (agent_cube(scope.agent_id), "")]
        q = (select(memory).join(memory_scope_stats, s.id == m.scope_id).where(
            s.tenant_id == scope.tenant_id, m.id.in_(wanted),
            or_(*(and_(s.cube == c, s.owner_id == o) for c, o in readable))).order_by(m.id))
        return await self._fetch(q, "get")

    async def history(self, scope: Scope, cube: str) -> list[StoredMemory]:
        """Every memory ever stored in ``cube`` for this caller, expired ones too, oldest first."""
        owner = self._owner_or_fail(scope, cube, "history")
        m, s = memory.c, memory_scope_stats.c
        q = (select(memory).join(memory_scope_stats, s.id == m.scope_id).where(
            s.tenant_id == scope.tenant_id, s.cube == cube, s.owner_id == owner).order_by(m.id))
        return await self._fetch(q, "history")

    async def _fetch(self, q: Any, operation: str) -> list[StoredMemory]:
        try:
            async with self.engine.connect() as conn:
                rows = (await conn.execute(q)).all()
        except (TimeoutError, SQLAlchemyError, OSError) as exc:
            raise self._error(exc, operation) from exc
        return [_stored(r, 0.0) for r in rows]


def _as_list(v: Vector | None) -> list[float] | None:
    return None if v is None else cast(list[float], v.tolist())


def _stored(r: Row[Any], score: float) -> StoredMemory:
    return StoredMemory(
        id=str(r.id), content=r.content, cube=r.cube, type=r.type, scope=r.scope,
        score=round(min(1.0, max(0.0, score)), 6), importance=float(r.importance),
        event_time=r.event_time.replace(tzinfo=UTC) if r.event_time else None,
        source_event_ids=tuple(json.loads(r.source_event_ids or "[]")),
        kind=cast(Literal["fact", "episode"], r.kind if r.kind == "episode" else "fact"),
        metadata={
            "session": r.session_key, "seq": int(r.seq), "user_id": r.user_id,
            "agent_id": r.agent_id,
            "valid_from": r.valid_from.replace(tzinfo=UTC).isoformat(),
            "valid_to": r.valid_to.replace(tzinfo=UTC).isoformat() if r.valid_to else None,
            "superseded_by": r.superseded_by,
            "created_at": r.created_at.replace(tzinfo=UTC).isoformat(),
        },
    )


def classify_db_error(exc: BaseException, *, provider: str, operation: str) -> ProviderError:
    """Connection loss, timeouts, deadlocks and a busy SQLite are worth retrying; the rest not."""
    retry = isinstance(exc, (OSError, asyncio.TimeoutError, PoolTimeout))
    if isinstance(exc, DBAPIError):
        code = exc.orig.args[0] if exc.orig is not None and exc.orig.args else None
        text = str(exc.orig).lower()
        retry = (exc.connection_invalidated or code in _RETRYABLE_MYSQL
                 or "database is locked" in text or "disk i/o error" in text
                 or "lost connection" in text or "can't connect" in text
                 or isinstance(exc.orig, (OSError, ConnectionError)))
    kind = RetryableProviderError if retry else PermanentProviderError
    return kind(f"{operation} failed: {type(exc).__name__}: {exc}"[:500],
                provider=provider, operation=operation)
