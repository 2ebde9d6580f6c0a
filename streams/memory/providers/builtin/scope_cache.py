"""What a worker keeps of a memory scope between searches, and how it stays exact.

A :class:`ScopeState` holds, for one scope at one version, every valid memory's
place (session, order, speaker), type and kind, its vector when an embedder is
configured, and the postings of the terms searches asked for. Writes of a
scope are serialised and bump its version (:mod:`.writes`), so the
ids of a scope's memories grow in commit order. A stale state is therefore
brought forward by reading only what changed:

- memories with an id above the highest one the state knows, still valid:
  their rows, vectors and postings (primary-key or scope-bounded ranges);
- memories the state holds that were expired since. Their number is exact —
  ``doc_count`` then + valid new memories − ``doc_count`` now — so they are
  looked up only when it is not zero (expiries are rare).

Reads of one refresh share a snapshot on MySQL (REPEATABLE READ); elsewhere
the version is read again afterwards and the refresh repeated if a write
came in between. Concurrent searches of a stale scope share one refresh,
which uses a connection of its own: nobody waits for it holding one.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeAlias

import numpy as np
import numpy.typing as npt
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from streams.adapters.db.schema.memory import (
    memory,
    memory_embedding,
    memory_scope_stats,
    memory_term,
)
from streams.memory.model import StoredMemory
from streams.memory.providers.builtin.rows import DbRow, Vector, stored
from streams.memory.rules.fusion import speaker_of
from streams.memory.rules.lexical import PostingArrays
from streams.memory.rules.mmr import WordIds, token_set

Ids = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
_EMPTY_IDS: Ids = np.zeros(0, dtype=np.int64)
_EMPTY: Floats = np.zeros(0, dtype=np.float64)
_CHUNK = 1000  # ids per IN (...) list
HEAD_CHARS = 80  # enough of a memory's text to find its speaker


# one term's postings in a scope, by ascending memory id: (ids, tf, doc_len), a plain
# tuple of arrays, which the garbage collector does not track
Postings: TypeAlias = PostingArrays


@dataclass
class ScopeState:
    scope_id: int
    version: int
    doc_count: int
    total_len: int
    last_id: int  # highest memory id seen; every later memory of the scope is newer
    # per memory (session, seq, speaker) as a plain tuple, which the garbage collector
    # stops tracking (it keeps tracking a tuple subclass such as Position)
    positions: dict[str, tuple[str | None, int, str | None]] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)
    episodes: set[str] = field(default_factory=set)  # the others are facts
    slots: dict[tuple[str, int], str] = field(default_factory=dict)
    vec_keys: list[str] = field(default_factory=list)  # ascending ids, one per matrix row
    vec_ids: Ids = field(default_factory=lambda: _EMPTY_IDS)  # the same as integers
    vec_index: dict[str, int] = field(default_factory=dict)
    terms: dict[str, Postings] = field(default_factory=dict)
    _buf: Vector | None = None

    @property
    def matrix(self) -> Vector:
        assert self._buf is not None
        return self._buf[: len(self.vec_keys)]

    @property
    def postings(self) -> int:
        return sum(len(p[0]) for p in self.terms.values())

    def add_rows(self, rows: Sequence[DbRow], full: bool) -> None:
        """Memories as whole rows, or with their first ``HEAD_CHARS`` as ``head``."""
        for r in rows:
            k = str(r.id)
            head = r.content[:HEAD_CHARS] if full else r.head
            p = (r.session_key, int(r.seq), speaker_of(head))
            self.positions[k] = p
            self.types[k] = str(r.type)
            if r.kind == "episode":
                self.episodes.add(k)
            if p[0] is not None:
                self.slots[(p[0], p[1])] = k
            self.last_id = max(self.last_id, int(r.id))

    def add_vectors(self, keys: list[str], vectors: Vector) -> None:
        """Append rows (ids above every held one, so the order stays ascending)."""
        assert self._buf is not None
        n, need = len(self.vec_keys), len(self.vec_keys) + len(keys)
        if need > len(self._buf):
            grown = np.empty((max(need, 2 * len(self._buf), 16), self._buf.shape[1]), np.float32)
            grown[:n] = self._buf[:n]
            self._buf = grown
        self._buf[n:need] = vectors
        for i, k in enumerate(keys, start=n):
            self.vec_index[k] = i
        self.vec_keys.extend(keys)
        self.vec_ids = np.concatenate([self.vec_ids, np.array([int(k) for k in keys], np.int64)])

    def add_postings(self, rows: Sequence[DbRow]) -> None:
        """New postings (ids above the held ones) of the terms already held."""
        by_term: dict[str, list[DbRow]] = {}
        for r in rows:
            if r.term in self.terms:
                by_term.setdefault(r.term, []).append(r)
        for term, new in by_term.items():
            new.sort(key=lambda r: int(r.memory_id))
            ids, tf, dl = self.terms[term]
            self.terms[term] = (
                np.concatenate([ids, np.array([int(r.memory_id) for r in new], np.int64)]),
                np.concatenate([tf, np.array([float(r.tf) for r in new])]),
                np.concatenate([dl, np.array([float(r.doc_len) for r in new])]))

    def drop(self, gone: set[str]) -> None:
        """Forget memories that were expired."""
        for k in gone:
            session, seq, _ = self.positions.pop(k)
            self.types.pop(k, None)
            self.episodes.discard(k)
            if session is not None:
                self.slots.pop((session, seq), None)
        if self._buf is not None and any(k in self.vec_index for k in gone):
            keep = [i for i, k in enumerate(self.vec_keys) if k not in gone]
            self._buf = np.ascontiguousarray(self.matrix[keep])
            self.vec_keys = [self.vec_keys[i] for i in keep]
            self.vec_ids = self.vec_ids[keep]
            self.vec_index = {k: i for i, k in enumerate(self.vec_keys)}
        ints = np.array(sorted(int(k) for k in gone), dtype=np.int64)
        for term, (ids, tf, dl) in list(self.terms.items()):
            mask = ~np.isin(ids, ints)
            if not mask.all():
                self.terms[term] = (ids[mask], tf[mask], dl[mask])


@dataclass
class _Delta:
    stats: DbRow
    rows: list[DbRow]
    vectors: list[DbRow]
    postings: list[DbRow] | None  # None: not read (no terms were held then)
    gone: set[str]


class ScopeCache:
    """Scope states of one worker, least recently used dropped beyond the limits."""

    def __init__(self, engine: AsyncEngine, model: tuple[str, int] | None, *,
                 max_rows: int = 200_000, max_postings: int = 2_000_000,
                 seed: Callable[[Sequence[DbRow]], None] | None = None) -> None:
        """``seed``: handed the whole rows of the memories a refresh finds (the memory
        cache), which a refresh reads anyway."""
        self.engine = engine
        self.model = model
        self.seed = seed
        self.max_rows = max_rows
        self.max_postings = max_postings
        self._states: OrderedDict[int, ScopeState] = OrderedDict()
        self._weights: dict[int, tuple[int, int]] = {}  # scope id -> (rows, postings)
        self._rows = 0
        self._postings = 0
        self._inflight: dict[int, asyncio.Future[ScopeState]] = {}
        self._snapshot: bool | None = None
        self.full_loads = 0
        self.refreshes = 0

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

    async def fresh_on(self, conn: AsyncConnection, stats: DbRow) -> ScopeState | None:
        """:meth:`fresh` on the caller's connection, which read ``stats`` (the same
        snapshot on MySQL); None when another caller is refreshing the scope: then
        wait with :meth:`fresh`, after giving the connection back."""
        sid, version = int(stats.id), int(stats.version)
        held = self._states.get(sid)
        if held is not None and held.version >= version:
            self._states.move_to_end(sid)
            return held
        if sid in self._inflight:
            return None
        mine: asyncio.Future[ScopeState] = asyncio.get_running_loop().create_future()
        self._inflight[sid] = mine
        mine.add_done_callback(self._settled(sid))
        try:
            st = await self._refresh_on(conn, sid, stats)
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
        async with self.engine.connect() as conn:
            return await self._refresh_on(conn, sid)

    async def _refresh_on(self, conn: AsyncConnection, sid: int, read: DbRow | None = None,
                          ) -> ScopeState:
        """Refresh on ``conn``; ``read``: the statistics row this transaction read."""
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
            if delta is not None and old is not None and current is old:
                self._apply(old, delta)
                self.refreshes += 1
                st = old
            else:
                st = loaded if loaded is not None else await self._load(conn, stats)
                self.full_loads += 1
            self._install(st)
            return st
        stats = (await conn.execute(select(memory_scope_stats).where(
            memory_scope_stats.c.id == sid))).one()
        return await self._load(conn, stats)  # not kept: the scope is being written fast

    @staticmethod
    async def version(conn: AsyncConnection, sid: int) -> int:
        s = memory_scope_stats.c
        return int((await conn.execute(select(s.version).where(s.id == sid))).scalar_one())

    def _select(self, full: bool) -> Any:
        """Whole rows (they go to the memory cache too), or what the state needs."""
        if full:
            return select(memory)
        m = memory.c
        return select(m.id, m.session_key, m.seq, m.type, m.kind,
                      func.substr(m.content, 1, HEAD_CHARS).label("head"))

    async def _load(self, conn: AsyncConnection, stats: DbRow) -> ScopeState:
        """Every valid memory of the scope (and its vector)."""
        sid, m = int(stats.id), memory.c
        rows = (await conn.execute(self._select(False).where(
            m.scope_id == sid, m.valid_to.is_(None)).order_by(m.id))).all()
        st = ScopeState(sid, int(stats.version), int(stats.doc_count), int(stats.total_len), 0)
        st.add_rows(rows, False)
        if self.model is not None:
            st._buf = np.zeros((0, self.model[1]), np.float32)
            vecs = (await conn.execute(self._vectors(sid, 0))).all()
            self._add_vectors(st, [r for r in vecs if str(r.memory_id) in st.positions])
        return st

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
        rows = (await conn.execute(self._select(True).where(
            m.scope_id == sid, m.id > st.last_id, m.valid_to.is_(None)).order_by(m.id))).all()
        expired = st.doc_count + len(rows) - int(stats.doc_count)
        if expired < 0 or expired > len(st.positions):
            return None  # the counts do not add up: start over
        vectors: list[DbRow] = []
        if self.model is not None and rows:
            vectors = list((await conn.execute(self._vectors(sid, st.last_id))).all())
        postings: list[DbRow] | None = None
        if st.terms and rows:
            postings = []
            t = memory_term.c
            ids = [int(r.id) for r in rows]
            for i in range(0, len(ids), _CHUNK):
                postings.extend((await conn.execute(
                    select(t.term, t.memory_id, t.tf, t.doc_len).where(
                        t.memory_id.in_(ids[i : i + _CHUNK]), t.scope_id == sid))).all())
        gone: set[str] = set()
        if expired:
            q = select(m.id).where(m.scope_id == sid, m.id <= st.last_id, m.valid_to.is_not(None))
            gone = {k for r in await conn.execute(q) if (k := str(r.id)) in st.positions}
            if len(gone) != expired:
                return None
        return _Delta(stats, list(rows), vectors, postings, gone)

    def _apply(self, st: ScopeState, d: _Delta) -> None:
        if d.gone:
            st.drop(d.gone)
        st.add_rows(d.rows, True)
        if self.seed is not None:
            self.seed(d.rows)
        self._add_vectors(st, [r for r in d.vectors if str(r.memory_id) in st.positions])
        if d.postings is not None:
            st.add_postings(d.postings)
        elif d.rows:
            st.terms = {}  # terms were taken in while the new postings were not read
        st.version, st.doc_count = int(d.stats.version), int(d.stats.doc_count)
        st.total_len = int(d.stats.total_len)

    def _install(self, st: ScopeState) -> None:
        self._states[st.scope_id] = st
        self._states.move_to_end(st.scope_id)
        self._account(st)

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
            rows, postings = self._weights.pop(sid)
            self._rows -= rows
            self._postings -= postings

    def clear(self) -> None:
        """Drop every state (a refresh in flight finishes for its callers only)."""
        self._states.clear()
        self._weights.clear()
        self._rows = self._postings = 0

    def keep_terms(self, st: ScopeState, version: int, loaded: dict[str, Postings]) -> None:
        """Hold postings that were read at ``version``, if the state is at it."""
        if st.version != version or self._states.get(st.scope_id) is not st:
            return
        if st.postings + sum(len(p[0]) for p in loaded.values()) > self.max_postings // 4:
            st.terms = {}  # one scope never takes more than a quarter
        st.terms.update(loaded)
        self._account(st)


def postings_of(rows: Sequence[DbRow], terms: Sequence[str]) -> dict[str, Postings]:
    """Rows of ``(term, memory_id, tf, doc_len)`` by term, every term present (maybe empty)."""
    grouped: dict[str, list[DbRow]] = {t: [] for t in terms}
    for r in rows:
        grouped.setdefault(r.term, []).append(r)
    out: dict[str, Postings] = {}
    for term, rs in grouped.items():
        if not rs:
            out[term] = (_EMPTY_IDS, _EMPTY, _EMPTY)
            continue
        rs.sort(key=lambda r: int(r.memory_id))
        out[term] = (np.array([int(r.memory_id) for r in rs], np.int64),
                     np.array([float(r.tf) for r in rs]),
                     np.array([float(r.doc_len) for r in rs]))
    return out


class Cached(NamedTuple):
    """A valid memory as plain values (nothing for the garbage collector to follow)."""

    id: int
    content: str
    fields: tuple[tuple[str, Any], ...]  # of the StoredMemory, metadata and score aside
    metadata: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, r: DbRow) -> Cached:
        m = stored(r, 0.0)
        fields = tuple((k, v) for k, v in m.__dict__.items() if k not in ("metadata", "score"))
        return cls(int(r.id), m.content, fields, tuple(m.metadata.items()))

    def memory(self, score: float) -> StoredMemory:
        """The memory with ``score`` (clamped to 0..1, 6 decimals); its own metadata dict.
        Built field by field: ``dataclasses.replace`` would cost several times more."""
        out = object.__new__(StoredMemory)
        out.__dict__.update(self.fields, score=round(min(1.0, max(0.0, score)), 6),
                            metadata=dict(self.metadata))
        return out


class MemoryCache:
    """Memories by id. A valid memory never changes (an expiry is its only update), so
    it may be served for as long as the memory is known to be valid. Also the word
    ids of those a lexical MMR compared (:class:`~streams.memory.rules.mmr.WordIds`)."""

    def __init__(self, max_rows: int = 50_000) -> None:
        self.max_rows = max_rows
        self.table = WordIds()
        # plain tuples: the garbage collector stops tracking those (not a Cached)
        self._items: OrderedDict[int, tuple[Any, ...]] = OrderedDict()
        self._words: dict[int, tuple[int, npt.NDArray[np.int64]]] = {}

    async def get(self, ids: Sequence[int],
                  load: Callable[[list[int]], Awaitable[Sequence[DbRow]]],
                  ) -> dict[int, Cached]:
        found: dict[int, Cached] = {}
        missing: list[int] = []
        for i in ids:
            c = self._items.get(i)
            if c is None:
                missing.append(i)
            else:
                self._items.move_to_end(i)
                found[i] = Cached._make(c)
        if missing:
            loaded = [Cached.of(r) for r in await load(missing)]
            found.update((c.id, c) for c in loaded)
            self._keep(loaded)
        return found

    def clear(self) -> None:
        self._items.clear()
        self._words.clear()
        self.table = WordIds()

    def put(self, rows: Sequence[DbRow]) -> None:
        """Hold these rows of valid memories."""
        self._keep([Cached.of(r) for r in rows])

    def words(self, items: Sequence[Cached]) -> list[npt.NDArray[np.int64]]:
        """The word sets (:func:`~streams.memory.rules.mmr.token_set`) of ``items`` as ids of
        one generation of the table."""
        for _ in range(2):
            generation = self.table.generation
            out = []
            for c in items:
                held = self._words.get(c.id)
                if held is None or held[0] != self.table.generation:
                    held = (self.table.generation, self.table.of(token_set(c.content)))
                    if c.id in self._items:
                        self._words[c.id] = held
                out.append(held[1])
            if self.table.generation == generation:
                break  # else the table was renewed meanwhile: once more, all of one age
        return out

    def _keep(self, items: Sequence[Cached]) -> None:
        if self.max_rows <= 0:
            return
        for c in items:
            self._items[c.id] = tuple(c)
            self._items.move_to_end(c.id)
        while len(self._items) > self.max_rows:
            old, _ = self._items.popitem(last=False)
            self._words.pop(old, None)
