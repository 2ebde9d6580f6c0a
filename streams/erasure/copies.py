"""MemoryCopies: an erasure's long-term memories, in every provider.

Cube by cube. For each cube the erased subject has memories in (a user's profile,
the agent cubes of the agents they spoke to; for a conversation, the cubes its
memories went to and its speakers' profiles) the cube's lock is held — the lock a
consolidation holds while it decides and writes, and under which it asks whether
an erasure covers it — while the subject's memories there go: each provider's
copies by the ids memstream recorded (``memory_origin``), the built-in provider's
rows of the user, and for a user's own profile whatever an external provider
still returns when its cube is searched (a copy a lost answer left behind). A
consolidation in flight therefore either wrote before (its memories go here) or
writes nothing. A tenant's erasure takes every copy of the tenant without locks.

No lock is held across a provider's retries: under the lock each provider call
is tried once, and a failure lets the lock go before the cube is tried again
(``retry``, with its backoff), from its start — every step is idempotent, so
what went before goes again as nothing. A provider that is down therefore
keeps the cube from its consolidations only for one call at a time.

Every copy's count is added to the erasure's record in the transaction that
deleted its origin row (the built-in provider's rows in their own).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial

from streams.erasure.model import (
    BUILTIN,
    MEMORY_TABLE,
    BuiltinRows,
    Counts,
    OriginRow,
    Selection,
)
from streams.erasure.ports import BuiltinMemories, Deletes, Origins, RecordCounts
from streams.memory.cube_locks import CubeLocks
from streams.memory.model import USER_CUBE, CubeKey, agent_cube, cube_key, decimal_id
from streams.memory.provider import Scope
from streams.memory.registry import ProviderRegistry

log = logging.getLogger(__name__)
Retry = Callable[[str, Callable[[], Awaitable[object]]], Awaitable[None]]
Count = Callable[[dict[str, int]], Awaitable[None]]


@dataclass(frozen=True)
class CubeWork:
    """What goes from one cube: origin rows by provider, and (a user) their built-in rows."""

    key: CubeKey
    origins: tuple[OriginRow, ...]


class MemoryCopies:
    def __init__(self, origins: Origins, tables: Deletes, builtin: BuiltinMemories,
                 providers: ProviderRegistry, locks: CubeLocks, retry: Retry, *,
                 stop: Callable[[], bool] = lambda: False) -> None:
        """``retry``: runs a call until it passes, within the erasure's turn; ``stop``:
        whether the turn is over (the built-in provider's deletes stop at a chunk)."""
        self.origins = origins
        self.tables = tables
        self.builtin = builtin
        self.providers = providers
        self.locks = locks
        self.retry = retry
        self.stop = stop

    async def erase(self, sel: Selection, record: RecordCounts, count: Count) -> None:
        """Every copy of the subject's memories, cube by cube (``record``: counts inside
        a deleting transaction; ``count``: counts of copies deleted elsewhere)."""
        for work in await self._plan(sel):
            if sel.target in ("user", "conversation"):
                await self.retry(f"erase-cube-{work.key.cube}",
                                 partial(self._locked, sel, work, record, count))
            else:
                await self._cube(sel, work, record, count)
        if sel.target == "user":  # any row of the user in a cube not planned
            await self._builtin(sel.tenant_id, BuiltinRows(user_id=sel.subject), record)
        elif sel.target == "tenant":
            await self._builtin(sel.tenant_id, BuiltinRows(), record)
        elif (sel.target == "memory" and (n := decimal_id(sel.subject)) is not None
              and not await self.origins.of(sel)):
            # a built-in memory no consolidation recorded (written before origins were)
            await self._builtin(sel.tenant_id, BuiltinRows(ids=(n,)), record)

    async def _plan(self, sel: Selection) -> list[CubeWork]:
        rows = await self.origins.of(sel)
        if sel.target == "conversation":
            rows += await self._from_messages(sel)
        by_key: dict[CubeKey, list[OriginRow]] = defaultdict(list)
        for r in rows:
            by_key[cube_key(sel.tenant_id, r.cube, r.user_id)].append(r)
        if sel.target == "user":
            by_key[cube_key(sel.tenant_id, USER_CUBE, sel.subject)]
            for agent in await self.tables.agents_of(sel.tenant_id, user_id=sel.subject):
                by_key[cube_key(sel.tenant_id, agent_cube(agent), sel.subject)]
        elif sel.target == "conversation":
            for user in await self.tables.speakers(sel.tenant_id, sel.subject):
                by_key[cube_key(sel.tenant_id, USER_CUBE, user)]
            for agent in await self.tables.agents_of(sel.tenant_id, conversation_id=sel.subject):
                by_key[cube_key(sel.tenant_id, agent_cube(agent), "")]
        return [CubeWork(k, tuple(v))
                for k, v in sorted(by_key.items(), key=lambda kv: repr(kv[0]))]

    async def _from_messages(self, sel: Selection) -> list[OriginRow]:
        """Memories judged from the conversation's messages stored in another one (a
        sub-agent's chat lives in its parent's history)."""
        parents, events = await self.tables.sub_agent_messages(sel.tenant_id, sel.subject)
        if not events:
            return []
        return await self.origins.judged_from(sel.tenant_id, parents, events)

    async def _locked(self, sel: Selection, work: CubeWork, record: RecordCounts,
                      count: Count) -> None:
        """One attempt at the cube under its lock, each provider call tried once."""
        async with self.locks.hold(work.key):
            await self._cube(sel, work, record, count, once=True)

    async def _call(self, what: str, call: Callable[[], Awaitable[object]], once: bool) -> None:
        """A provider call: tried once (under a cube's lock), or until it passes."""
        if once:
            await call()
        else:
            await self.retry(what, call)

    async def _cube(self, sel: Selection, work: CubeWork, record: RecordCounts,
                    count: Count, *, once: bool = False) -> None:
        by_provider: dict[tuple[str, str, str], list[str]] = defaultdict(list)
        for r in work.origins:
            by_provider[(r.provider, r.user_id, r.agent_id)].append(r.memory_id)
        for (provider, user, agent), ids in sorted(by_provider.items()):
            scope = Scope(sel.tenant_id, user, agent)
            for i in range(0, len(ids), 100):
                await self._by_id(provider, scope, work.key.cube, ids[i: i + 100], record,
                                  once)
        if sel.target == "user":
            await self._builtin(sel.tenant_id, BuiltinRows(user_id=sel.subject,
                                                           cube=work.key.cube), record)
            if work.key.cube == USER_CUBE:
                await self._sweep(Scope(sel.tenant_id, sel.subject, "-"), USER_CUBE, count,
                                  once)
        elif sel.target == "tenant":
            scope = Scope(sel.tenant_id, work.key.owner or "-", _agent_of(work))
            await self._sweep(scope, work.key.cube, count, once)

    async def _by_id(self, provider: str, scope: Scope, cube: str, ids: list[str],
                     record: RecordCounts, once: bool) -> None:
        """One provider's copies by id, then their origin rows (counted with them)."""
        if provider == BUILTIN:
            numbers = tuple(n for i in ids if (n := decimal_id(i)) is not None)
            await self._builtin(scope.tenant_id, BuiltinRows(ids=numbers), record)
        else:
            forget = self.providers.get(provider).provider.forget
            await self._call(f"erase-{provider}", lambda: forget(scope, cube, ids), once)
        await self.retry("erase-origins", lambda: self.origins.drop(
            scope.tenant_id, provider, ids, record))

    async def _builtin(self, tenant_id: str, rows: BuiltinRows,
                       record: RecordCounts) -> None:
        await self.retry("erase-memory",
                         lambda: self.builtin.erase(tenant_id, rows, record, self.stop))

    async def _sweep(self, scope: Scope, cube: str, count: Count, once: bool) -> None:
        """What each external provider still returns from the subject's own cube."""
        for provider in self.providers.configured():
            if provider != BUILTIN:
                await self._sweep_one(provider, scope, cube, count, once)

    async def _sweep_one(self, provider: str, scope: Scope, cube: str, count: Count,
                         once: bool) -> None:
        forget_cube = self.providers.get(provider).provider.forget_cube
        found: list[int] = []

        async def sweep() -> None:
            found.append(await forget_cube(scope, cube))

        await self._call(f"erase-{provider}", sweep, once)
        await count({provider: found[-1]})

    async def dry_run(self, sel: Selection, counts: Counts) -> None:
        """What :meth:`erase` would delete, counted (copies only an external provider's
        search would find are not)."""
        planned = await self._plan(sel)
        origins = [r for w in planned for r in w.origins]
        for r in origins:
            counts.add(r.provider if r.provider != BUILTIN else MEMORY_TABLE, 1)
        if sel.target == "memory":
            counts.add("memory_origin", len(origins))
        rows = {"user": BuiltinRows(user_id=sel.subject),
                "tenant": BuiltinRows()}.get(sel.target)
        if rows is None and sel.target == "memory" and not origins:
            n = decimal_id(sel.subject)
            rows = BuiltinRows(ids=(n,)) if n is not None else None
        if rows is None:
            builtin_ids = tuple(n for r in origins if r.provider == BUILTIN
                                if (n := decimal_id(r.memory_id)) is not None)
            rows = BuiltinRows(ids=builtin_ids) if builtin_ids else None
            counts.by_store.pop(MEMORY_TABLE, None)
        if rows is not None:
            for store, n in (await self.builtin.count(sel.tenant_id, rows)).items():
                counts.by_store[store] = n


def _agent_of(work: CubeWork) -> str:
    """The agent of an agent cube (``agent_{id}``), for the provider's scope."""
    cube = work.key.cube
    return cube[len("agent_"):] if cube.startswith("agent_") else "-"

