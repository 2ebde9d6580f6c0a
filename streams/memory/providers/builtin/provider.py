"""The built-in long-term memory provider: MySQL (or SQLite) with hybrid retrieval.

Writes (:meth:`BuiltinProvider.add`) store the memory rows, their postings in
the inverted index, their vectors and the scope's statistics in one
transaction; the same content from the same source events is stored once.
:meth:`~BuiltinProvider.expire` never deletes a memory: it sets ``valid_to``
and ``superseded_by`` and takes the memory out of the index.

A search costs the same whatever the tenant holds elsewhere: it reads the
scopes' statistics rows, the postings of the query's own terms that the
worker does not hold already, and the rows of the memories it returns. Each
scope's valid memories, vectors and postings are held in memory and brought
up to date incrementally when a write changed the scope. Ranking is
:mod:`streams.memory.rules.fusion` and :mod:`streams.memory.rules.mmr`, the code the
offline LoCoMo evaluation measures.

The parts: :mod:`.writes` (transactions), :mod:`.scope_cache`
(scope and row caches), :mod:`.search` (ranking), :mod:`.rows`
(row conversion and error classification). Every call is counted in the
provider metrics under ``provider`` = the provider's name (``mysql``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import ColumnElement, and_, or_, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.schema.memory import SHOWN_COLUMNS, memory, memory_scope_stats
from streams.adapters.embeddings.embedders import Embedder, EmbedderError
from streams.clock import naive_utc_now
from streams.memory.model import (
    USER_CUBE,
    HeldScopes,
    MemoryCandidate,
    StoredMemory,
    agent_cube,
    decimal_id,
)
from streams.memory.provider import (
    ModelCaller,
    PermanentProviderError,
    Scope,
    SearchRequest,
    WriteResult,
)
from streams.memory.providers.builtin.erase import Eraser, Record
from streams.memory.providers.builtin.held_reads import HeldReads
from streams.memory.providers.builtin.row_cache import MemoryCache, RowsRead
from streams.memory.providers.builtin.rows import (
    Vector,
    as_provider_error,
    content_hash,
    stored,
)
from streams.memory.providers.builtin.scope_cache import ScopeCache
from streams.memory.providers.builtin.search import Search
from streams.memory.providers.builtin.unheld import UnheldLimits, UnheldReads
from streams.memory.providers.builtin.writes import Writes, prepare, prepare_off_loop
from streams.memory.rules.fusion import FusionWeights, Ramp
from streams.memory.rules.recency import Recency
from streams.metrics import PROVIDER_CALLS, PROVIDER_FAILURES, PROVIDER_LATENCY

__all__ = ["BuiltinProvider", "as_provider_error", "content_hash"]
_DB_ERRORS = (TimeoutError, SQLAlchemyError, OSError)


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
        ramp: Ramp = Ramp(),  # noqa: B008 - frozen
        recency: Recency = Recency(),  # noqa: B008 - frozen
        vector_cache_rows: int = 200_000,
        scope_hold_max: int | None = None,
        unheld: UnheldLimits = UnheldLimits(),  # noqa: B008 - frozen
        cache_postings: int = 4_000_000,
        row_cache_rows: int = 200_000,
        rows_read: RowsRead | None = None,
        ann_min_vectors: int = 0,
        held_reads: HeldReads | None = None,
        clock: Callable[[], datetime] = naive_utc_now,
    ) -> None:
        """``held_reads``: searches read their scopes' versions on the connection it keeps
        between them (:mod:`.held_reads`); :meth:`close` closes it."""
        self.engine = engine
        self.embedder = embedder if embedder is not None and embedder.dim > 0 else None
        self.name = name
        model = (self.embedder.name, self.embedder.dim) if self.embedder is not None else None
        self.memories = MemoryCache(row_cache_rows)
        self.cache = ScopeCache(engine, model, max_rows=vector_cache_rows, hold_max=scope_hold_max,
                                max_postings=cache_postings, rows=self.memories,
                                rows_read=rows_read, ann_min_vectors=ann_min_vectors)
        self.held_reads = held_reads
        self._search = Search(engine, self.cache, self.memories, weights=weights,
                              candidates=candidates, mmr_lambda=mmr_lambda, ramp=ramp,
                              recency=recency, held=self.held_reads,
                              unheld=UnheldReads(model, unheld))
        self._writes = Writes(engine, clock)
        self.eraser = Eraser(engine)

    async def close(self) -> None:
        """Close the connection held for searches (before the engine is disposed)."""
        if self.held_reads is not None:
            await self.held_reads.close()

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

    @asynccontextmanager
    async def _call(self, operation: str) -> AsyncIterator[None]:
        """Count the call, time it, count a failure by error class; database errors
        become provider errors."""
        PROVIDER_CALLS.labels(self.name, operation).inc()
        started = time.perf_counter()
        try:
            try:
                yield
            except _DB_ERRORS as exc:
                raise as_provider_error(exc, provider=self.name, operation=operation) from exc
        except Exception as err:
            PROVIDER_FAILURES.labels(self.name, operation, type(err).__name__).inc()
            raise
        finally:
            PROVIDER_LATENCY.labels(self.name, operation).observe(time.perf_counter() - started)

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
        async with self._call("add"):
            owner = self._owner_or_fail(scope, cube, "add")
            prepared = (await asyncio.to_thread(prepare, memories, session_key, self.name)
                        if prepare_off_loop(memories)
                        else prepare(memories, session_key, self.name))
            if not prepared:
                return WriteResult([])
            unique = list({p.hash: p for p in prepared}.values())
            known = await self._writes.ids_by_hash_outside(scope, cube, owner,
                                                           [p.hash for p in unique])
            fresh = [p for p in unique if p.hash not in known]
            vectors: dict[str, bytes] = {}
            model = None
            if self.embedder is not None:
                model = (self.embedder.name, self.embedder.dim)
                if fresh:  # embedded before the transaction: no connection waits on the model
                    embedded = await self._embed([p.candidate.content for p in fresh], scope)
                    vectors = {p.hash: np.asarray(v, dtype=np.float32).tobytes()
                               for p, v in zip(fresh, embedded, strict=True)}
            known = await self._writes.add(scope, cube, owner, unique, vectors, model)
            return WriteResult([known[p.hash] for p in prepared])

    async def _embed(self, texts: list[str], scope: Scope) -> list[list[float]]:
        """Vectors of ``texts``, their model usage counted for the scope's tenant and agent."""
        assert self.embedder is not None
        try:
            return await self.embedder.embed(
                texts, caller=ModelCaller(scope.tenant_id, scope.agent_id))
        except EmbedderError as exc:
            raise PermanentProviderError(str(exc), provider=self.name, operation="embed") from exc

    async def _query_vector(self, query: str, scope: Scope) -> Vector:
        return np.asarray((await self._embed([query], scope))[0], dtype=np.float32)

    async def expire(self, scope: Scope, cube: str, memory_ids: Sequence[str],
                     superseded_by: str | None) -> None:
        """Mark memories invalid (``valid_to``, ``superseded_by``) and unindex them.

        Ids that are unknown, already expired or of another scope are ignored,
        so a repeated expiry changes nothing.
        """
        async with self._call("expire"):
            owner = self._owner_or_fail(scope, cube, "expire")
            ids = sorted({n for i in memory_ids if (n := decimal_id(i)) is not None})
            if ids:
                await self._writes.expire(scope, cube, owner, ids, superseded_by)

    # ---------------------------------------------------------------- erasure
    def _in_cube(self, scope: Scope, cube: str, operation: str) -> ColumnElement[bool]:
        s = memory_scope_stats.c
        owner = self._owner_or_fail(scope, cube, operation)
        return memory.c.scope_id.in_(select(s.id).where(
            s.tenant_id == scope.tenant_id, s.cube == cube, s.owner_id == owner))

    async def forget(self, scope: Scope, cube: str, memory_ids: Sequence[str]) -> int:
        """Delete memories of ``cube`` for good (rows, postings, vectors; expired ones too)."""
        async with self._call("forget"):
            ids = sorted({n for i in memory_ids if (n := decimal_id(i)) is not None})
            if not ids:
                return 0
            where = and_(memory.c.id.in_(ids), self._in_cube(scope, cube, "forget"))
            return (await self.eraser.erase(scope.tenant_id, where)).get("memory", 0)

    async def forget_cube(self, scope: Scope, cube: str) -> int:
        """Delete every memory of ``cube`` for this scope (an agent cube: of every user)."""
        async with self._call("forget"):
            where = self._in_cube(scope, cube, "forget")
            return (await self.eraser.erase(scope.tenant_id, where)).get("memory", 0)

    async def erase(self, tenant_id: str, where: ColumnElement[bool],
                    record: Record | None = None,
                    stop: Callable[[], bool] | None = None) -> dict[str, int]:
        """Delete the memories of ``tenant_id`` matching ``where`` in any cube (an
        erasure's selection); counts per table, each chunk's added by ``record``
        inside its transaction; ``stop`` is asked after each chunk (True: the rest
        stays for the next call)."""
        async with self._call("forget"):
            return await self.eraser.erase(tenant_id, where, record, stop)

    def drop_caches(self) -> None:
        """Forget every scope state and memory this worker holds (after an erasure); a
        load or search whose reads began before serves its caller, and nothing it read
        is held."""
        self.cache.clear()
        self.memories.clear()

    def drop_scopes(self, what: HeldScopes) -> None:
        """Forget the scope states and memories ``what`` covers (after an erasure), and
        nothing else: other scopes stay held. A load or search of a covered scope whose
        reads began before serves its caller, and nothing it read is held."""
        self.cache.drop(what)
        self.memories.drop(what)

    # ----------------------------------------------------------------- search
    async def search(self, scope: Scope, request: SearchRequest) -> list[StoredMemory]:
        """Valid memories of the readable cubes among ``request.cubes``, best first."""
        async with self._call("search"):
            self._check(scope, "search")
            pairs = {(c, o) for c in request.cubes if (o := self.owner_of(scope, c)) is not None}
            if not pairs or request.top_k <= 0:
                return []
            if request.order == "strength":
                return await self._search.strongest(scope, request, pairs)
            if not request.query.strip():
                return []
            qvec = (asyncio.ensure_future(self._query_vector(request.query, scope))
                    if self.embedder is not None and not request.keyword_only else None)
            try:
                return await self._search.run(scope, request, pairs, qvec)
            finally:
                if qvec is not None and not qvec.done():
                    qvec.cancel()

    # ---------------------------------------------------------------- reading
    async def get(self, scope: Scope, ids: Sequence[str]) -> list[StoredMemory]:
        """Memories by id within the caller's readable cubes, expired ones included."""
        async with self._call("get"):
            self._check(scope, "get")
            wanted = sorted({n for i in ids if (n := decimal_id(i)) is not None})
            if not wanted:
                return []
            m, s = memory.c, memory_scope_stats.c
            readable = [(USER_CUBE, scope.user_id), (agent_cube(scope.agent_id), "")]
            q = (select(*SHOWN_COLUMNS).join(memory_scope_stats, s.id == m.scope_id).where(
                s.tenant_id == scope.tenant_id, m.id.in_(wanted),
                or_(*(and_(s.cube == c, s.owner_id == o) for c, o in readable))).order_by(m.id))
            return await self._fetch(q)

    async def history(self, scope: Scope, cube: str) -> list[StoredMemory]:
        """Every memory ever stored in ``cube`` for this caller, expired ones too, oldest first."""
        async with self._call("history"):
            owner = self._owner_or_fail(scope, cube, "history")
            m, s = memory.c, memory_scope_stats.c
            q = (select(*SHOWN_COLUMNS).join(memory_scope_stats, s.id == m.scope_id).where(
                s.tenant_id == scope.tenant_id, s.cube == cube, s.owner_id == owner)
                 .order_by(m.id))
            return await self._fetch(q)

    async def _fetch(self, q: Any) -> list[StoredMemory]:
        async with self.engine.connect() as conn:
            rows = (await conn.execute(q)).all()
        return [stored(r, 0.0) for r in rows]
