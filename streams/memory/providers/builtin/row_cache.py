"""The rows of valid memories a worker holds, so that a search reads only the rows of
picks it does not hold (by primary key)."""

from __future__ import annotations

import gc
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from itertools import takewhile
from sys import intern
from typing import Any, NamedTuple, Protocol, cast

from streams.memo import drop_oldest
from streams.memory.model import HeldScopes, StoredMemory, decimal_id
from streams.memory.providers.builtin.drops import Drops
from streams.memory.providers.builtin.rows import DbRow, stored


class Cached(NamedTuple):
    """A valid memory as plain values (nothing for the garbage collector to follow), the
    strings many memories share interned: about 0.7 kB a memory."""

    id: int
    content: str
    cube: str
    type: str
    scope: str
    importance: float
    event_time: datetime | None
    source_event_ids: tuple[str, ...]
    kind: str
    session: str | None
    seq: int
    user_id: str
    agent_id: str
    valid_from: str
    created_at: str
    role: str | None = None
    span: tuple[int, int] | None = None
    tenant_id: str = ""

    @classmethod
    def of(cls, r: DbRow) -> Cached:
        m = stored(r, 0.0)
        d = m.metadata
        session = d["session"]
        return cls(int(r.id), m.content, intern(m.cube), intern(m.type), intern(m.scope),
                   m.importance, m.event_time, m.source_event_ids, intern(m.kind),
                   intern(session) if isinstance(session, str) else None, int(r.seq),
                   intern(str(d["user_id"])), intern(str(d["agent_id"])),
                   intern(str(d["valid_from"])), intern(str(d["created_at"])),
                   intern(r.role) if isinstance(r.role, str) else None,
                   cast(tuple[int, int] | None, d["span"]), intern(str(r.tenant_id)))


class RowsRead(Protocol):
    """Work done once per memory a scope load or refresh reads, instead of per search
    (the worker counts the tokens of each memory's budget line)."""

    def prepare(self, rows: Sequence[Cached]) -> Callable[[], None]:
        """Run in the thread that reads the rows, touching nothing shared; what it
        returns runs on the event loop once the rows are held."""
        ...


_CUBE, _USER, _TENANT = (Cached._fields.index(f) for f in ("cube", "user_id", "tenant_id"))


def _covers(what: HeldScopes, row: tuple[Any, ...]) -> bool:
    """Whether ``what`` covers the held row ``row`` (a :class:`Cached` or its fields)."""
    return row[_TENANT] == what.tenant_id and what.covers_row(
        row[_TENANT], row[_CUBE], row[_USER], str(row[0]))


def memory_of(row: tuple[Any, ...], key: str, score: float) -> StoredMemory:
    """The memory of ``row`` (a :class:`Cached`, or the plain tuple of its fields) whose
    id is ``key``, with ``score`` as shown (:mod:`~streams.memory.rules.shown_score`:
    the caller's, for all its memories at once); its own metadata dict.
    Built field by field from the tuple: ``dataclasses.replace`` would cost several
    times more."""
    (_, content, cube, type_, scope, importance, event_time, sources, kind, session, seq,
     user_id, agent_id, valid_from, created_at, role, span, _) = row
    out = object.__new__(StoredMemory)
    out.__dict__.update(
        id=key, content=content, cube=cube, type=type_, scope=scope,
        score=score, importance=importance,
        event_time=event_time, source_event_ids=sources, kind=kind,
        metadata={"session": session, "seq": seq, "user_id": user_id, "agent_id": agent_id,
                  "valid_from": valid_from, "valid_to": None, "superseded_by": None,
                  "created_at": created_at, "role": role, "span": span})
    return out


class MemoryCache:
    """Memories by id. A valid memory never changes (an expiry is its only update), so
    it may be served for as long as the memory is known to be valid.

    The rows are tuples of plain values in a plain dict, least recently used first:
    the garbage collector does not walk such a dict (:mod:`streams.memo`); as an
    ``OrderedDict``, 200,000 rows were a third of the work of every full collection.
    A new tuple stays tracked until a collection has seen it, and putting it into that
    dict would make the collector walk the dict again: new rows wait in a dict of
    their own and move over once the collector has let go of them."""

    def __init__(self, max_rows: int = 200_000) -> None:
        self.max_rows = max_rows
        self.drops = Drops()
        self._items: dict[int, tuple[Any, ...]] = {}
        self._fresh: dict[int, tuple[Any, ...]] = {}  # newer than every row of _items

    def __len__(self) -> int:
        return len(self._items) + len(self._fresh)

    @property
    def generation(self) -> int:
        """One more at each drop or clear (what a read notes before it begins)."""
        return self.drops.generation

    async def get(self, ids: Sequence[int],
                  load: Callable[[list[int]], Awaitable[Sequence[DbRow]]],
                  since: int | None = None) -> dict[int, tuple[Any, ...]]:
        """The rows of ``ids`` that are valid, as :class:`Cached` or the plain tuples of
        its fields (:func:`memory_of` takes either); ``load`` reads the others, held
        unless dropped (an erasure: :meth:`drop`, :meth:`clear`) since generation
        ``since``, when the caller's reads began: then they may be erased ones, and
        serve this call only."""
        self._settle()
        found: dict[int, tuple[Any, ...]] = {}
        missing: list[int] = []
        items, fresh = self._items, self._fresh
        for i in ids:
            c = items.pop(i, None)
            if c is not None:
                items[i] = c  # now the most recently used
                found[i] = c
            elif (c := fresh.get(i)) is not None:
                found[i] = c
            else:
                missing.append(i)
        if missing:
            loaded = [Cached.of(r) for r in await load(missing)]
            found.update((c.id, c) for c in loaded)
            gone = self.drops.since(since) if since is not None else []
            if gone is None:
                return found
            self.keep([c for c in loaded if not any(_covers(w, c) for w in gone)])
        return found

    def clear(self) -> None:
        self.drops.clear()
        self._items.clear()
        self._fresh = {}

    def drop(self, what: HeldScopes) -> int:
        """Let go of the rows ``what`` covers (named ids looked up, others found by a
        walk of the rows held); how many went."""
        self.drops.drop(what)
        named = [n for i in what.memory_ids if (n := decimal_id(i)) is not None]
        n = 0
        for held in (self._items, self._fresh):
            keys = [k for k in named if k in held] if what.memory_ids else list(held)
            gone = [k for k in keys if _covers(what, held[k])]
            for k in gone:
                del held[k]
            n += len(gone)
        return n

    def keep(self, items: Sequence[Cached]) -> None:
        """Hold these valid memories."""
        if self.max_rows <= 0:
            return
        fresh = self._fresh
        for c in items[-self.max_rows:]:
            self._items.pop(c.id, None)
            fresh.pop(c.id, None)
            fresh[c.id] = tuple(c)
        over = len(self) - self.max_rows
        if over > 0:  # the least recently used go first: _items, then the oldest fresh
            from_items = min(over, len(self._items))
            drop_oldest(self._items, from_items)
            drop_oldest(fresh, over - from_items)
        self._settle()

    def _settle(self) -> None:
        """Move the oldest fresh rows the collector no longer tracks (a collection
        untracks the tuples it finds holding only plain values) to the main dict."""
        fresh = self._fresh
        if not fresh:
            return
        settled = list(takewhile(lambda kv: not gc.is_tracked(kv[1]), fresh.items()))
        if len(settled) == len(fresh):
            self._fresh = {}  # a new dict: the old one's deleted slots would slow its walks
        else:
            for k, _ in settled:
                del fresh[k]
        self._items.update(settled)
