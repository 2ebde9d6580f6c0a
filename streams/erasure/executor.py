"""ErasureExecutor: one erasure request carried out, resumable at every step.

``erase(request)`` is idempotent on ``erasure_id``; after a crash at any point the
same request (delivered again) continues where the record says it stopped:

========== ==================================================================
(none)     record who and up to where: the cutoff (now) and the chat topic's
           end offsets; from here on the erasure covers the subject's events
recorded   fix the conversations it touches (``planned``)
planned    a fence through every ingest partition: each takes the erasure in
           (events it covers are skipped from then on), tombstones the sessions
           table entries of the conversations that go whole, and records that it
           passed once everything it stored before is written (``fenced``)
fenced     delete (``deleting``): provider copies by id (and, for a user or a
           tenant, every copy left in their cubes), the built-in provider's
           memories, then table by table, the messages last, then the Redis
           keys; all of it once more, for what a consolidation that had started
           before the erasure wrote meanwhile; ``done``
done       nothing: the receipt of the first run again
========== ==================================================================

Every delete adds its count to the record in its own transaction, so the
receipt counts each row once however often the erasure was resumed. Nothing
of the erased content is logged or recorded.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import true
from sqlalchemy.ext.asyncio import AsyncConnection

from streams.adapters.db.cube_lock import CubeLocks
from streams.adapters.db.erasure_deletes import TableDeletes, TableStep, erasure_steps
from streams.adapters.db.erasure_log import ErasureLog, ErasureRecord
from streams.adapters.db.erasure_origins import BUILTIN, LocatedMemory, OriginRows
from streams.adapters.db.schema.memory import memory
from streams.adapters.kafka.publish import Outgoing, Publisher
from streams.adapters.redis.conversation_cache import ConversationCache
from streams.backoff import retry_forever
from streams.clock import naive_utc
from streams.erasure.model import (
    REDIS_KEYS,
    SESSIONS_TABLE,
    Counts,
    EraseConversation,
    ErasureMark,
    MemorySource,
    Selection,
)
from streams.erasure.registry import ErasureRegistry
from streams.memory.model import USER_CUBE, CubeKey, cube_key
from streams.memory.provider import PermanentProviderError, Scope
from streams.memory.providers.builtin.provider import BuiltinProvider
from streams.memory.registry import ProviderRegistry
from streams.metrics import ERASED
from streams.wire.erasure import ErasureError, ErasureFence, ErasureReceipt, ErasureRequest

log = logging.getLogger(__name__)
FENCE_LOG_S = 30.0  # how often a wait for the fence says which partitions it waits for
EXTERNAL_NOTES = {
    "mem0": "mem0 keeps the text of deleted memories in its history database "
            "(history_db_path); purge it there (docs/providers.md)",
}


class ErasureRefused(Exception):
    """The request cannot be carried out as asked (an unknown memory, a reused id)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ErasureConfig:
    idle_topic: str
    partitions: int
    fence_poll_s: float = 0.2
    retry_initial_s: float = 0.2
    retry_max_s: float = 10.0


class ErasureExecutor:
    def __init__(self, config: ErasureConfig, erasure_log: ErasureLog, tables: TableDeletes,
                 origins: OriginRows, builtin: BuiltinProvider, providers: ProviderRegistry,
                 cache: ConversationCache, publisher: Publisher, registry: ErasureRegistry,
                 locks: CubeLocks, *, chat_offsets: Callable[[], Awaitable[dict[int, int]]],
                 home: Callable[[str], int], clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.log = erasure_log
        self.tables = tables
        self.origins = origins
        self.builtin = builtin
        self.providers = providers
        self.cache = cache
        self.publisher = publisher
        self.registry = registry
        self.locks = locks
        self.chat_offsets = chat_offsets
        self.home = home
        self.clock = clock

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    async def _retry(self, what: str, call: Callable[[], Awaitable[object]]) -> None:
        """Until it passes; a provider refusing for good (or not configured) stops the
        erasure where it is (:class:`PermanentProviderError`): it stays unfinished, and
        the same request continues it once the provider is fixed."""
        await retry_forever(call, what=what, initial_s=self.config.retry_initial_s,
                            max_s=self.config.retry_max_s,
                            give_up=lambda exc: isinstance(exc, PermanentProviderError))

    # ------------------------------------------------------------------ flow
    async def erase(self, req: ErasureRequest) -> ErasureReceipt:
        """Carry ``req`` out (or continue it); its receipt."""
        started = self.now()
        rec = await self.log.get(req.erasure_id)
        if rec is None:
            rec = await self._record(req)
        mark = rec.mark
        if (mark.tenant_id, mark.target, mark.subject) != (req.tenant_id, req.target,
                                                           req.subject):
            raise ErasureRefused("conflict", f"erasure_id {req.erasure_id!r} was used for "
                                 f"another erasure ({mark.target} in tenant {mark.tenant_id!r})")
        self.registry.add(mark)
        if rec.status != "done":
            await self._carry_out(rec)
        return await self.receipt(req, started)

    async def receipt(self, req: ErasureRequest, started: datetime) -> ErasureReceipt:
        rec = await self.log.get(req.erasure_id)
        assert rec is not None
        counts = await self.log.counts(req.erasure_id)
        return ErasureReceipt(
            erasure_id=req.erasure_id, tenant_id=req.tenant_id, target=req.target,
            subject=req.subject, status="done", cutoff=rec.mark.cutoff.replace(tzinfo=UTC),
            counts=counts, started_at=started,
            finished_at=rec.finished_at.replace(tzinfo=UTC) if rec.finished_at else None,
            warnings=[note for p, note in EXTERNAL_NOTES.items() if counts.get(p)])

    async def _record(self, req: ErasureRequest) -> ErasureRecord:
        source = None
        if req.target == "memory":
            found = await self._locate(req)
            first = found[0]
            source = MemorySource(first.cube, first.user_id, frozenset(first.source_event_ids))
        offsets = {} if req.target == "memory" else await self.chat_offsets()
        now = self.now()
        return await self.log.record(
            erasure_id=req.erasure_id, tenant_id=req.tenant_id, target=req.target,
            subject=req.subject, cutoff=now, chat_offsets=offsets, now=now, source=source,
            reference=req.reference)

    async def _locate(self, req: ErasureRequest) -> list[LocatedMemory]:
        found = await self.origins.locate(req.tenant_id, req.subject,
                                          req.provider.lower() if req.provider else None)
        if not found:
            raise ErasureRefused("not_found", f"no memory {req.subject!r} in tenant "
                                 f"{req.tenant_id!r}" + (f" ({req.provider})"
                                                         if req.provider else ""))
        if len({f.provider for f in found}) > 1:
            raise ErasureRefused("bad_request", f"memory id {req.subject!r} is held by "
                                 f"{sorted({f.provider for f in found})}: name the provider")
        return found

    async def _carry_out(self, rec: ErasureRecord) -> None:
        mark, status = rec.mark, rec.status
        eid = mark.erasure_id
        if status == "recorded":
            await self.log.plan(eid, await self._conversations(mark), self.now())
            status = "planned"
        conversations = await self.log.conversations(eid)
        if status == "planned":
            if mark.target != "memory":
                await self._fence(mark, conversations)
            await self.log.set_status(eid, "fenced", self.now())
        await self.log.set_status(eid, "deleting", self.now())
        sel = selection(mark, conversations)
        log.info("erasure %s: deleting (%s in tenant %r, %d conversations)", eid, mark.target,
                 mark.tenant_id, len(conversations))
        for _ in range(2):  # the second pass: what a run in flight wrote meanwhile
            await self._retry("erase-memories", lambda: self._memories_locked(eid, sel))
            await self._tables(eid, sel)
            await self._redis(eid, sel)
        await self.log.set_status(eid, "done", self.now())
        self.registry.finished()
        counts = await self.log.counts(eid)
        for store, n in counts.items():
            ERASED.labels(store).inc(n)
        log.info("erasure %s done: %d rows, keys and copies", eid, sum(counts.values()))

    async def _conversations(self, mark: ErasureMark) -> list[EraseConversation]:
        if mark.target == "user":
            return await self.tables.conversations_of(mark.tenant_id, mark.subject)
        if mark.target == "conversation":
            return [EraseConversation(mark.subject, True)]
        return []

    # ----------------------------------------------------------------- fence
    async def _fence(self, mark: ErasureMark, conversations: Sequence[EraseConversation]) -> None:
        """Send the fence to every ingest partition; wait until each passed it."""
        parts = range(self.config.partitions)
        whole = [c.conversation_id for c in conversations if c.whole]
        by_part: dict[int, list[str]] = {p: [] for p in parts}
        for c in whole:
            by_part.setdefault(self.home(c), []).append(c)
        issued = self.now()
        fences = [Outgoing(self.config.idle_topic, f"erasure:{mark.erasure_id}".encode(),
                           ErasureFence(
                               type="erasure_fence", erasure_id=mark.erasure_id,
                               tenant_id=mark.tenant_id, target=mark.target,
                               subject=mark.subject, cutoff=mark.cutoff.replace(tzinfo=UTC),
                               chat_offsets=mark.chat_offsets,
                               conversations=None if mark.target == "tenant" else by_part[p],
                               partition=p, issued_at=issued).model_dump_json().encode(),
                           partition=p) for p in parts]
        await self._retry("erasure-fence", lambda: self.publisher.publish(fences))
        wanted, said = set(parts), time.monotonic()
        while not wanted <= (passed := await self.log.fences(mark.erasure_id)):
            await asyncio.sleep(self.config.fence_poll_s)
            if time.monotonic() - said >= FENCE_LOG_S:
                said = time.monotonic()
                log.info("erasure %s: waiting for ingest partitions %s to pass its fence",
                         mark.erasure_id, sorted(wanted - passed))

    # ------------------------------------------------------------- deleting
    def _record_counts(self, eid: str) -> Callable[[AsyncConnection, dict[str, int]],
                                                   Awaitable[None]]:
        async def record(conn: AsyncConnection, counts: dict[str, int]) -> None:
            await self.log.add_count(conn, eid, counts)
        return record

    async def _memories_locked(self, eid: str, sel: Selection) -> None:
        """:meth:`_memories` holding the locks of the subject's own cubes (a user's
        profile; those of a conversation's users), which a consolidation holds while it
        decides and writes: a run either wrote before (its memories are deleted here)
        or finds the erasure when it takes the lock (and writes nothing)."""
        users = {sel.subject} if sel.target == "user" else (
            {r.user_id for r in await self.origins.of(sel)} | set(
                await self.tables.speakers(sel.tenant_id, sel.subject))
            if sel.target == "conversation" else set())
        keys: list[CubeKey] = sorted((cube_key(sel.tenant_id, USER_CUBE, u) for u in users),
                                     key=repr)
        async with AsyncExitStack() as stack:
            for key in keys:
                await stack.enter_async_context(self.locks.hold(key))
            await self._memories(eid, sel)

    async def _memories(self, eid: str, sel: Selection) -> None:
        """Every provider's copies: by the ids memstream recorded, then (a user or a
        tenant) whatever is left in their cubes, then the built-in provider's rows."""
        rows = await self.origins.of(sel)
        groups: dict[tuple[str, str, str, str], list[str]] = {}
        for r in rows:
            groups.setdefault((r.provider, r.cube, r.user_id, r.agent_id), []).append(r.memory_id)
        for (provider, cube, user, agent), ids in groups.items():
            for i in range(0, len(ids), 100):
                await self._forget_ids(eid, provider, Scope(sel.tenant_id, user, agent), cube,
                                       ids[i: i + 100])
        if sel.target in ("user", "tenant"):
            cubes = {(p, cube, user, agent) for p, cube, user, agent in groups if p != BUILTIN}
            if sel.target == "user":
                cubes = {(p, USER_CUBE, sel.subject, "-") for p in self.providers.configured()
                         if p != BUILTIN}
            for provider, cube, user, agent in sorted(cubes):
                await self._sweep(eid, provider, Scope(sel.tenant_id, user, agent), cube)
            m = memory.c
            where = (m.user_id == sel.subject) if sel.target == "user" else true()
            record = self._record_counts(eid)
            await self._retry("erase-memory",
                              lambda: self.builtin.erase(sel.tenant_id, where, record))

    async def _forget_ids(self, eid: str, provider: str, scope: Scope, cube: str,
                          ids: list[str]) -> None:
        """One provider's copies by id, then their origin rows (counted with them, in one
        transaction)."""
        record = self._record_counts(eid)
        if provider == BUILTIN:
            where = memory.c.id.in_([int(x) for x in ids if x.isdigit()])
            await self._retry("erase-memory",
                              lambda: self.builtin.erase(scope.tenant_id, where, record))
        else:
            forget = self.providers.get(provider).provider.forget
            await self._retry(f"erase-{provider}", lambda: forget(scope, cube, ids))
        await self._retry("erase-origins", lambda: self.origins.drop(
            scope.tenant_id, provider, ids, record))

    async def _sweep(self, eid: str, provider: str, scope: Scope, cube: str) -> None:
        """Copies memstream holds no id of (a retried add whose first answer was lost),
        in a cube that is the erased subject's own: the user's profile, or any cube of
        an erased tenant (an agent cube is shared: only a user's own memories go)."""
        forget_cube = self.providers.get(provider).provider.forget_cube
        found: list[int] = []

        async def sweep() -> None:
            found.append(await forget_cube(scope, cube))

        await self._retry(f"erase-{provider}", sweep)
        if found[-1]:
            async with self.tables.engine.begin() as conn:
                await self.log.add_count(conn, eid, {provider: found[-1]})

    async def _tables(self, eid: str, sel: Selection) -> None:
        for step in erasure_steps(sel):
            await self._table(eid, step)

    async def _table(self, eid: str, step: TableStep) -> None:
        record = self._record_counts(eid)
        done: list[int] = []

        async def run() -> None:
            done.append(await self.tables.delete(step, record))

        await self._retry(f"erase-{step.name}", run)
        if done[-1]:
            log.info("erasure %s: %d rows of %s", eid, done[-1], step.name)

    async def _redis(self, eid: str, sel: Selection) -> None:
        if not self.cache.enabled:
            return

        async def forget() -> None:
            if sel.target == "tenant":
                n = await self.cache.forget_tenant(sel.tenant_id)
            else:
                n = await self.cache.forget([(sel.tenant_id, c) for c in sel.touched])
            if n:
                async with self.tables.engine.begin() as conn:
                    await self.log.add_count(conn, eid, {REDIS_KEYS: n})

        if sel.target != "memory":
            await self._retry("erase-redis", forget)

    # -------------------------------------------------------------- dry run
    async def dry_run(self, req: ErasureRequest) -> ErasureReceipt:
        """What ``req`` would delete, counted; nothing changes, nothing is recorded.
        Copies a provider holds that memstream has no id of are not counted (only the
        erasure's sweep of the provider finds them)."""
        started = self.now()
        mark = ErasureMark(req.erasure_id, req.tenant_id, req.target, req.subject,
                           naive_utc(started))
        if req.target == "memory":
            found = (await self._locate(req))[0]
            conversations: list[EraseConversation] = []
        else:
            conversations = await self._conversations(mark)
        sel = selection(mark, conversations)
        counts = Counts()
        origins = await self.origins.of(sel)
        for row in origins:
            counts.add(row.provider if row.provider != BUILTIN else memory.name, 1)
        if req.target == "memory":  # (the other targets count origin rows as a table)
            counts.add("memory_origin", len(origins))
            if found.provider == BUILTIN and not origins:
                counts.add(memory.name, 1)  # a memory no consolidation wrote
        if req.target in ("user", "tenant"):
            m = memory.c
            counts.by_store[memory.name] = await self.builtin.eraser.count(
                req.tenant_id, (m.user_id == req.subject) if req.target == "user" else true())
        for step in erasure_steps(sel):
            counts.add(step.name, await self.tables.count(step))
        if req.target == "tenant":
            counts.add(REDIS_KEYS, await self.cache.forget_tenant(req.tenant_id, dry_run=True))
        else:
            counts.add(REDIS_KEYS, await self.cache.count([(req.tenant_id, c)
                                                           for c in sel.touched]))
        counts.add(SESSIONS_TABLE, sum(1 for c in conversations if c.whole))
        return ErasureReceipt(
            erasure_id=req.erasure_id, tenant_id=req.tenant_id, target=req.target,
            subject=req.subject, status="dry_run", counts=counts.by_store, started_at=started,
            finished_at=self.now())


def selection(mark: ErasureMark, conversations: Sequence[EraseConversation]) -> Selection:
    return Selection(mark.tenant_id, mark.target, mark.subject,
                     whole=tuple(c.conversation_id for c in conversations if c.whole),
                     touched=tuple(c.conversation_id for c in conversations))


def refusal(req: ErasureRequest | None, exc: ErasureRefused) -> ErasureReceipt:
    return ErasureReceipt(
        erasure_id=req.erasure_id if req else None, tenant_id=req.tenant_id if req else None,
        target=req.target if req else None, subject=req.subject if req else None,
        status="rejected", error=ErasureError(code=exc.code, message=str(exc)))
