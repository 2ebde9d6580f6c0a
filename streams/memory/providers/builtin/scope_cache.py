"""The scopes a worker holds between searches, and how each stays exact.

A scope is held as a :class:`~.scope_state.ScopeState` (its memories' places,
word sets, vectors and lexical index), so a search reads no posting and no
memory text from the database once the scope is held, whatever its size.
Writes of a scope are serialised and bump its version (:mod:`.writes`), so the
ids of a scope's memories grow in commit order. A stale state is therefore
brought forward by reading only what changed:

- memories with an id above the highest one the state knows, still valid:
  their rows (indexed as they come), vectors and subject postings
  (primary-key or scope-bounded ranges);
- memories the state holds that were expired or erased since. Their number is exact —
  ``doc_count`` then + valid new memories − ``doc_count`` now — so they are
  looked up only when it is not zero (expiries are rare), by counting ranges of
  the held ids rather than reading them all (:mod:`.gone_ids`). They leave every
  structure at once, but their postings lazily: they are masked out of each
  term as a search reads it (:meth:`ScopeState.postings_of`), and the index is
  rebuilt without them when enough have gathered.

Reads of one refresh share a snapshot on MySQL (REPEATABLE READ); elsewhere
the version is read again afterwards and the refresh repeated if a write
came in between. Concurrent searches of a stale scope share one refresh,
which uses a connection of its own: nobody waits for it holding one.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import case, func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from streams.adapters.db.schema.memory import (
    memory,
    memory_embedding,
    memory_scope_stats,
    memory_term,
)
from streams.memory.model import HeldScopes
from streams.memory.providers.builtin.ann import AnnParams, VectorIndex
from streams.memory.providers.builtin.drops import Drops
from streams.memory.providers.builtin.gone_ids import Bounds, CountIn, IdsIn, gone_ids
from streams.memory.providers.builtin.row_cache import Cached, MemoryCache, RowsRead
from streams.memory.providers.builtin.rows import DbRow, texts_reach
from streams.memory.providers.builtin.scope_state import Postings, ScopeState
from streams.metrics import SCOPE_MEMORIES, VECTOR_GRAPHS_BUILDING

_CHUNK = 1000  # ids per IN (...) list
BUILD_OFF_LOOP = 2_000  # memories indexed in a worker thread, not on the event loop
SHORT_MEMORY_CHARS = 80  # ... or as many characters as that many short memories hold
LOADS_AT_ONCE = 2  # whole loads of scopes not held, each on a pooled connection, at a time


@dataclass
class _Delta:
    stats: DbRow
    rows: list[DbRow]
    vectors: list[DbRow]
    postings: list[DbRow]  # of the subject terms held when they were read
    subjects: set[str]
    gone: set[str]


class ScopeCache:
    """Scope states of one worker, least recently used dropped beyond the limits."""

    def __init__(self, engine: AsyncEngine, model: tuple[str, int] | None, *,
                 max_rows: int = 200_000, max_postings: int = 4_000_000,
                 hold_max: int | None = None,
                 rows: MemoryCache | None = None, rows_read: RowsRead | None = None,
                 ann_min_vectors: int = 0,
                 ann_params: AnnParams = AnnParams()) -> None:  # noqa: B008
        """``rows``: the memory cache, handed the whole rows that loads and refreshes
        read anyway; ``rows_read`` prepares whatever else the rows the memory cache
        holds need (in a load's thread). A scope with at least ``ann_min_vectors``
        vectors (0: none) gets a graph of them (:mod:`.ann`), built in a thread once
        the scope is held. A scope of more than ``hold_max`` valid memories (default:
        ``max_rows``) is never held (:meth:`too_large`; :mod:`.unheld` searches it)."""
        self.engine = engine
        self.hold_max = max_rows if hold_max is None else min(hold_max, max_rows)
        self.model = model
        self.rows = rows
        self.rows_read = rows_read
        self.ann_min_vectors = ann_min_vectors
        self.ann_params = ann_params
        self._indexing: dict[int, asyncio.Task[None]] = {}
        self.max_rows = max_rows
        self.max_postings = max_postings
        self._states: OrderedDict[int, ScopeState] = OrderedDict()
        self._keys: dict[int, tuple[str, str, str]] = {}  # held scope -> tenant, cube, owner
        self._weights: dict[int, tuple[int, int]] = {}  # scope id -> (rows, postings)
        self._rows = 0
        self._postings = 0
        self._inflight: dict[int, asyncio.Future[ScopeState]] = {}
        self._loads = asyncio.Semaphore(LOADS_AT_ONCE)
        self._snapshot: bool | None = None
        self.full_loads = 0
        self.refreshes = 0
        self.drops = Drops()

    @property
    def generation(self) -> int:
        """One more at each drop or clear (what a refresh notes before its reads)."""
        return self.drops.generation

    async def snapshot_reads(self, conn: AsyncConnection) -> bool:
        """Whether the reads of one transaction share a snapshot (MySQL, REPEATABLE READ)."""
        if self._snapshot is None:
            level = (await conn.get_isolation_level()
                     if self.engine.dialect.name == "mysql" else "")
            self._snapshot = level in ("REPEATABLE READ", "SERIALIZABLE")
        return self._snapshot

    async def fresh(self, stats: DbRow) -> ScopeState:
        """The scope's state at ``stats.version`` or newer, refreshed when needed (on a
        connection of the refresh's own, shared with concurrent callers)."""
        sid, version = int(stats.id), int(stats.version)
        for _ in range(3):
            held = self._states.get(sid)
            if held is not None and held.version >= version:
                self._states.move_to_end(sid)
                return held
            task = self._inflight.get(sid)
            if task is None:
                task = asyncio.ensure_future(self._refresh(sid))
                self._inflight[sid] = task
                task.add_done_callback(self._settled(sid))
            await asyncio.wait([task])  # a cancelled caller leaves the refresh running
            if task.cancelled():
                continue  # its caller was cancelled during its refresh: go again
            st = task.result()
            if st.version >= version:
                return st
        return await self._refresh(sid)

    def current(self, stats: DbRow) -> ScopeState | None:
        """The held state of ``stats``' scope when it is at ``stats.version`` or newer
        (kept as the most recently used), else None."""
        held = self._states.get(int(stats.id))
        if held is not None and held.version >= int(stats.version):
            self._states.move_to_end(held.scope_id)
            return held
        return None

    async def fresh_on(self, conn: AsyncConnection, stats: DbRow,
                       since: int | None = None) -> ScopeState | None:
        """:meth:`fresh` on the caller's connection, which read ``stats`` (the same
        snapshot on MySQL), for a held scope that is current or behind; None when the
        scope is not held or another caller is refreshing it: then wait with
        :meth:`fresh`, after giving the connection back. A whole load thus always runs
        on its own: a caller that gives up (a query's deadline) never cancels it, so a
        scope too large to load within one deadline is still loaded, once. ``since``:
        the generation when the caller's reads began; a scope dropped since (in part:
        memories erased from its state) is not refreshed from those reads: None."""
        if (current := self.current(stats)) is not None:
            return current
        sid = int(stats.id)
        held = self._states.get(sid)
        if since is None:
            since = self.generation
        if held is None or sid in self._inflight or self._dropped(stats, since):
            return None
        mine: asyncio.Future[ScopeState] = asyncio.get_running_loop().create_future()
        self._inflight[sid] = mine
        mine.add_done_callback(self._settled(sid))
        try:
            st = await self._refresh_on(conn, sid, since, stats)
        except asyncio.CancelledError:
            mine.cancel()
            raise
        except BaseException as exc:
            mine.set_exception(exc)
            raise
        mine.set_result(st)
        return st

    def _settled(self, sid: int) -> Callable[[asyncio.Future[ScopeState]], None]:
        def done(task: asyncio.Future[ScopeState]) -> None:
            if self._inflight.get(sid) is task:
                del self._inflight[sid]
            if not task.cancelled():
                task.exception()  # retrieved here; every waiter gets it too

        return done

    async def _refresh(self, sid: int) -> ScopeState:
        """A held scope brought forward at once; a scope not held loaded in its turn,
        ``LOADS_AT_ONCE`` at a time, its connection taken when its turn comes: a load
        holds one for as long as it indexes (in a thread when large), and a worker's
        first questions of many users would otherwise take them all, and the searches
        and writes waiting for one would time out."""
        async with nullcontext() if sid in self._states else self._loads:
            since = self.generation
            async with self.engine.connect() as conn:
                return await self._refresh_on(conn, sid, since)

    async def _refresh_on(self, conn: AsyncConnection, sid: int, since: int,
                          read: DbRow | None = None) -> ScopeState:
        """Refresh on ``conn``, whose reads began at generation ``since``; ``read``: the
        statistics row this transaction read. When the scope was dropped meanwhile (an
        erasure: :meth:`drop`, :meth:`clear`), what it read may hold erased memories: it
        serves its callers and is neither held nor handed to the memory cache."""
        snapshot = await self.snapshot_reads(conn)
        for _ in range(3):
            stats = read if read is not None and snapshot else (await conn.execute(
                select(memory_scope_stats).where(memory_scope_stats.c.id == sid))).one()
            old = self._states.get(sid)
            delta = await self._delta(conn, old, stats) if old is not None else None
            loaded = None if delta is not None else await self._load(conn, stats)
            if not snapshot and await self.version(conn, sid) != int(stats.version):
                await conn.rollback()
                continue  # a write came in between two reads: read again
            current = self._states.get(sid)
            if current is not None and current.version >= int(stats.version):
                return current
            if self._dropped(stats, since):
                return (loaded or await self._load(conn, stats))[0]
            if self.too_large(stats):  # grew past the ceiling since its caller looked
                if delta is not None and old is not None:
                    self._apply(old, delta)  # serves its callers, held no more
                    return old
                return (loaded or await self._load(conn, stats))[0]
            if delta is not None and old is not None and current is old:
                self._apply(old, delta)
                self.refreshes += 1
                st = old
            else:
                st, hold = loaded or await self._load(conn, stats)
                hold()
                self.full_loads += 1
            self._install(st, _key(stats))
            return st
        stats = (await conn.execute(select(memory_scope_stats).where(
            memory_scope_stats.c.id == sid))).one()
        st, hold = await self._load(conn, stats)  # not kept: the scope is being written fast
        if not self._dropped(stats, since):
            hold()
        return st

    @staticmethod
    async def version(conn: AsyncConnection, sid: int) -> int:
        s = memory_scope_stats.c
        return int((await conn.execute(select(s.version).where(s.id == sid))).scalar_one())

    async def _load(self, conn: AsyncConnection, stats: DbRow,
                    ) -> tuple[ScopeState, Callable[[], None]]:
        """Every valid memory of the scope (indexed in a worker thread when there are
        many, so other searches go on meanwhile) and its vector; and what hands the
        rows to the memory cache (and ``rows_read``'s work on them) when called."""
        sid, m = int(stats.id), memory.c
        rows = (await conn.execute(select(memory).where(
            m.scope_id == sid, m.valid_to.is_(None)).order_by(m.id))).all()
        st = ScopeState(sid, int(stats.version), int(stats.doc_count), int(stats.total_len), 0)
        if off_loop(rows):
            cached, prepared = await asyncio.to_thread(self._build, st, rows)
        else:
            cached, prepared = self._build(st, rows)
        if self.model is not None:
            st._buf = np.zeros((0, self.model[1]), np.float32)
            vecs = (await conn.execute(self._vectors(sid, 0))).all()
            self._add_vectors(st, [r for r in vecs if str(r.memory_id) in st.positions])

        def hold() -> None:
            if self.rows is not None:
                self.rows.keep(cached)
            prepared()

        return st, hold

    def _build(self, st: ScopeState, rows: Sequence[DbRow],
               ) -> tuple[list[Cached], Callable[[], None]]:
        """Index ``rows`` into ``st``; the rows as the memory cache holds them, and what
        is left to do of ``rows_read``'s work on them."""
        st.add_rows(rows)
        return self._cached(rows)

    def _cached(self, rows: Sequence[DbRow]) -> tuple[list[Cached], Callable[[], None]]:
        if self.rows is None or self.rows.max_rows <= 0:
            return [], _nothing
        cached = [Cached.of(r) for r in rows[-self.rows.max_rows:]]
        return cached, (self.rows_read.prepare(cached) if self.rows_read is not None
                        else _nothing)

    def _vectors(self, sid: int, above: int) -> Any:
        assert self.model is not None
        e = memory_embedding.c
        return (select(e.memory_id, e.vector)
                .where(e.scope_id == sid, e.model == self.model[0], e.memory_id > above)
                .order_by(e.memory_id))

    def _add_vectors(self, st: ScopeState, rows: Sequence[DbRow]) -> None:
        if rows and self.model is not None:
            matrix = np.frombuffer(b"".join(r.vector for r in rows), dtype=np.float32)
            st.add_vectors([str(r.memory_id) for r in rows],
                           matrix.reshape(len(rows), self.model[1]))

    async def _delta(self, conn: AsyncConnection, st: ScopeState, stats: DbRow,
                     ) -> _Delta | None:
        """What changed since ``st``; None when a full load is the simpler way."""
        sid, m = st.scope_id, memory.c
        rows = (await conn.execute(select(memory).where(
            m.scope_id == sid, m.id > st.last_id, m.valid_to.is_(None)).order_by(m.id))).all()
        expired = st.doc_count + len(rows) - int(stats.doc_count)
        if expired < 0 or expired > len(st.positions):
            return None  # the counts do not add up: start over
        vectors: list[DbRow] = []
        if self.model is not None and rows:
            vectors = list((await conn.execute(self._vectors(sid, st.last_id))).all())
        postings: list[DbRow] = []
        subjects = set(st.subjects)
        if subjects and rows:
            t = memory_term.c
            ids = [int(r.id) for r in rows]
            for i in range(0, len(ids), _CHUNK):
                postings.extend((await conn.execute(
                    select(t.term, t.memory_id, t.tf, t.doc_len).where(
                        t.memory_id.in_(ids[i : i + _CHUNK]), t.scope_id == sid,
                        t.term.in_(sorted(subjects))))).all())
        gone: set[str] = set()
        if expired:
            # expired, or erased (their rows deleted) before this process heard of the
            # erasure: found by counting ranges of the held ids, not by reading them all
            found = await gone_ids(st.places.ids, _count_in(conn, sid), _ids_in(conn, sid))
            if found is None or len(found) != expired:
                return None
            gone = {str(i) for i in found}
        return _Delta(stats, list(rows), vectors, postings, subjects, gone)

    def _apply(self, st: ScopeState, d: _Delta) -> None:
        if d.gone:
            st.drop(d.gone)
        st.add_rows(d.rows)
        cached, prepared = self._cached(d.rows)
        if self.rows is not None:
            self.rows.keep(cached)
        prepared()
        self._add_vectors(st, [r for r in d.vectors if str(r.memory_id) in st.positions])
        if d.rows:
            st.add_postings(d.postings, d.subjects)
        st.version, st.doc_count = int(d.stats.version), int(d.stats.doc_count)
        st.total_len = int(d.stats.total_len)

    def _dropped(self, stats: DbRow, since: int) -> bool:
        """Whether ``stats``' scope was dropped since generation ``since``."""
        gone = self.drops.since(since)
        return gone is None or any(w.covers_scope(*_key(stats)) for w in gone)

    def _install(self, st: ScopeState, key: tuple[str, str, str]) -> None:
        self._states[st.scope_id] = st
        self._keys[st.scope_id] = key
        self._states.move_to_end(st.scope_id)
        self._account(st)
        if (self.ann_min_vectors > 0 and st.ann is None and st.scope_id not in self._indexing
                and len(st.vec_keys) >= self.ann_min_vectors):
            task = asyncio.ensure_future(self._index(st))
            self._indexing[st.scope_id] = task
            VECTOR_GRAPHS_BUILDING.inc()

            def done(_: asyncio.Task[None]) -> None:
                self._indexing.pop(st.scope_id, None)
                VECTOR_GRAPHS_BUILDING.dec()

            task.add_done_callback(done)

    async def _index(self, st: ScopeState) -> None:
        """Build ``st``'s graph in a thread (searches use the exact product meanwhile),
        then bring it up to the vectors added or dropped during the build."""
        changes, keys = st.vec_changes, st.vec_ids
        index = await asyncio.to_thread(VectorIndex.build, keys, st.matrix, self.ann_params)
        if st.vec_changes != changes:
            new = np.flatnonzero(~np.isin(st.vec_ids, keys))
            index.add(st.vec_ids[new], st.matrix[new])
            index.remove(keys[~np.isin(keys, st.vec_ids)])
        st.ann = index

    async def indexed(self) -> None:
        """Wait for the graphs being built (tests, benchmarks)."""
        while self._indexing:
            await asyncio.gather(*self._indexing.values(), return_exceptions=True)

    def _account(self, st: ScopeState) -> None:
        """Update the totals for ``st``'s size, then drop the least recently used
        states while over a limit (never the only one)."""
        rows, postings = self._weights.get(st.scope_id, (0, 0))
        weight = (len(st.positions), st.postings)
        self._weights[st.scope_id] = weight
        self._rows += weight[0] - rows
        self._postings += weight[1] - postings
        while len(self._states) > 1 and (self._rows > self.max_rows
                                         or self._postings > self.max_postings):
            sid, _ = self._states.popitem(last=False)
            self._keys.pop(sid, None)
            rows, postings = self._weights.pop(sid)
            self._rows -= rows
            self._postings -= postings
        SCOPE_MEMORIES.set(self._rows)

    def too_large(self, stats: DbRow) -> bool:
        """Whether ``stats``' scope holds more valid memories than a worker holds of one
        scope; its state is let go if it was held (it grew past the ceiling)."""
        if int(stats.doc_count) <= self.hold_max:
            return False
        sid = int(stats.id)
        if self._states.pop(sid, None) is not None:
            self._keys.pop(sid, None)
            rows, postings = self._weights.pop(sid)
            self._rows -= rows
            self._postings -= postings
            SCOPE_MEMORIES.set(self._rows)
        return True

    @property
    def held_memories(self) -> int:
        """Memories of the scopes held."""
        return self._rows

    def holds(self, scope_id: int) -> bool:
        return scope_id in self._states

    def clear(self) -> None:
        """Drop every state (a refresh in flight finishes for its callers only)."""
        self.drops.clear()
        self._states.clear()
        self._keys.clear()
        self._weights.clear()
        self._rows = self._postings = 0
        SCOPE_MEMORIES.set(0)

    def drop(self, what: HeldScopes) -> int:
        """Drop the states of the scopes ``what`` covers, and no other (a refresh of one
        in flight finishes for its callers only); how many went. Memories named by id
        (``what.memory_ids``) leave the states that hold them, which stay held: the
        erasure's change of the scope's count and version is then what the state's next
        refresh reads, without a whole load."""
        self.drops.drop(what)
        if what.memory_ids:
            self._forget(what)
            return 0
        gone = [sid for sid, key in self._keys.items() if what.covers_scope(*key)]
        for sid in gone:
            self._let_go(sid)
        SCOPE_MEMORIES.set(self._rows)
        return len(gone)

    def _let_go(self, sid: int) -> None:
        del self._states[sid], self._keys[sid]
        rows, postings = self._weights.pop(sid)
        self._rows -= rows
        self._postings -= postings

    def _forget(self, what: HeldScopes) -> None:
        """The memories ``what`` names leave the states of the scopes it covers; each
        state counts them gone (as the erasure did in the scope's statistics)."""
        for sid, key in list(self._keys.items()):
            st = self._states.get(sid)
            if st is None or not what.covers_scope(*key):
                continue  # (let go of by the accounting of one before it)
            gone = {k for k in what.memory_ids if k in st.positions}
            if not gone:
                continue
            st.drop(gone)
            st.doc_count -= len(gone)  # total_len: the next refresh reads it
            if not st.positions:  # the scope's last memory: its statistics went too
                self._let_go(sid)
            else:
                self._account(st)
        SCOPE_MEMORIES.set(self._rows)

    def keep_terms(self, st: ScopeState, version: int, loaded: dict[str, Postings]) -> None:
        """Hold subject postings that were read at ``version``, if the state is at it."""
        if st.version != version or self._states.get(st.scope_id) is not st:
            return
        st.keep(loaded)
        self._account(st)


def _key(stats: DbRow) -> tuple[str, str, str]:
    """A statistics row's scope: tenant, cube, owner."""
    return str(stats.tenant_id), str(stats.cube), str(stats.owner_id)


def off_loop(rows: Sequence[DbRow]) -> bool:
    """Whether indexing ``rows`` is work for a thread rather than the event loop:
    ``BUILD_OFF_LOOP`` memories, or memories whose text is as long as that many short
    ones' (``SHORT_MEMORY_CHARS`` each). Indexing costs per word (a memory's terms and
    word set, stored with it or, for a row stored without them, analysed from its text)
    and per character (its budget line is counted from its text): a user's memories of
    an agent conversation (passages of ~500 characters) cost several times as many
    short chat turns."""
    return len(rows) >= BUILD_OFF_LOOP or texts_reach(
        (r.content for r in rows), BUILD_OFF_LOOP * SHORT_MEMORY_CHARS)


def _nothing() -> None:
    return None


def _count_in(conn: AsyncConnection, sid: int) -> CountIn:
    """The valid memories of scope ``sid`` within each range and the sum of their ids,
    in one query."""
    m = memory.c

    async def count(bounds: Sequence[Bounds]) -> list[tuple[int, int]]:
        within = [m.id.between(a, b) for a, b in bounds]
        row = (await conn.execute(
            select(*[func.count(case((w, 1))) for w in within],
                   *[func.sum(case((w, m.id))) for w in within])
            .where(m.scope_id == sid, m.valid_to.is_(None),
                   m.id.between(bounds[0][0], bounds[-1][1])))).one()
        return [(int(row[i]), int(row[i + len(bounds)] or 0)) for i in range(len(bounds))]

    return count


def _ids_in(conn: AsyncConnection, sid: int) -> IdsIn:
    """The ids of the valid memories of scope ``sid`` within the ranges."""
    m = memory.c

    async def ids(bounds: Sequence[Bounds]) -> set[int]:
        return {int(r.id) for r in await conn.execute(select(m.id).where(
            m.scope_id == sid, m.valid_to.is_(None),
            or_(*[m.id.between(a, b) for a, b in bounds])))}

    return ids
