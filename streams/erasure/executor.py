"""ErasureExecutor: one erasure request carried out, resumable at every step.

``erase(request)`` is idempotent on the tenant and ``erasure_id``; after a crash
at any point the same request (delivered again) continues where the record says
it stopped:

========== ==================================================================
(none)     record who and up to where: the cutoff (now) and the chat topic's
           end offsets; from here on the erasure covers the subject's events
recorded   find the conversations it touches (``planned``)
planned    a fence through every ingest partition: each takes the erasure in
           (events it covers are skipped from then on), tombstones the sessions
           table entries of an erased tenant or conversation, and records that
           it passed once everything it stored before is written. For a user,
           the conversations are then looked up again (complete now: nothing the
           erasure covers is stored any more), and a second round of fences
           goes to the partitions holding those only the user spoke in, which
           tombstone them from that list (``fenced``)
fenced     delete (``deleting``): the conversations are looked up again, then
           the long-term memories cube by cube (:mod:`.copies`), the tables one
           by one, the messages last, the Redis keys; all of it once more, for
           what a consolidation that had started before the erasure wrote
           meanwhile; ``done``
done       nothing: the receipt of the first run again
blocked    an error no attempt mends stopped it (``error`` says which): the
           same request starts it again from ``recorded``
========== ==================================================================

Every delete adds its count to the record in its own transaction, so the
receipt counts each row once however often the erasure was resumed. A failure
that may pass (the database, Redis, Kafka, a provider answering 5xx) is retried
until it does; anything else (:func:`transient`) stops the erasure where it is,
``blocked`` with the error. Nothing of the erased content is logged or recorded.

**Turns.** An erasure never holds the queue (and the worker's rebalances) for
long: one delivery of the request carries it for at most ``turn_s``, and not
past the start of a rebalance or a shutdown (``should_release``). Every wait
(for the fences, between the attempts of an outage, for a cube lock) and every
chunk of deletes is a checkpoint; at the first one past its turn the erasure
raises :class:`ErasureReleased`, its request is produced to the end of the
queue again, and the next delivery continues where the record says. A fence
that a stopped or paused ingest partition has not passed therefore never stops
a rebalance (which waits for every record the worker was handed) nor the
erasures behind it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from streams import tracing
from streams.backoff import retry_forever
from streams.clock import naive_utc
from streams.erasure.copies import MemoryCopies
from streams.erasure.model import (
    REDIS_KEYS,
    SESSIONS_TABLE,
    Counts,
    EraseConversation,
    ErasureMark,
    ErasureRecord,
    LocatedMemory,
    MemorySource,
    Selection,
)
from streams.erasure.ports import (
    BuiltinMemories,
    CachedConversations,
    ChatOffsets,
    Deletes,
    DeleteStep,
    ErasureLog,
    Origins,
    RecordCounts,
)
from streams.erasure.registry import ErasureRegistry
from streams.memory.cube_locks import CubeLockLost, CubeLocks, CubeLockTimeout
from streams.memory.provider import RetryableProviderError
from streams.memory.registry import ProviderRegistry
from streams.metrics import ERASED
from streams.redaction import error_text
from streams.stores import CacheUnavailable, StoreUnavailable
from streams.wire.envelope import Outgoing, Publisher, PublishFailed
from streams.wire.erasure import ErasureError, ErasureFence, ErasureReceipt, ErasureRequest

log = logging.getLogger(__name__)
FENCE_LOG_S = 30.0  # how often a wait for the fence says which partitions it waits for
EXTERNAL_NOTES = {
    "mem0": "mem0 keeps the text of deleted memories in its history database "
            "(history_db_path); purge it there (docs/providers.md)",
}
RefusalCode = Literal["bad_request", "not_found", "conflict", "unauthorized", "over_quota"]
TRANSIENT = (StoreUnavailable, OSError, TimeoutError, CacheUnavailable, PublishFailed,
             RetryableProviderError, CubeLockTimeout, CubeLockLost)
ReleaseReason = Literal["rebalance", "turn"]


def transient(exc: BaseException) -> bool:
    """A failure another attempt may get past (an outage), not a refusal or a bug."""
    return isinstance(exc, TRANSIENT)


class ErasureReleased(Exception):
    """The erasure let the queue go before it finished: a rebalance or a shutdown
    began (``rebalance``), or its turn ran out (``turn``). Its request goes to the
    end of the queue again; the record says where it continues."""

    def __init__(self, reason: ReleaseReason) -> None:
        super().__init__(f"erasure released ({reason})")
        self.reason: ReleaseReason = reason


class ErasureRefused(Exception):
    """The request cannot be carried out as asked (an unknown memory, a reused id)."""

    def __init__(self, code: RefusalCode, message: str) -> None:
        super().__init__(message)
        self.code: RefusalCode = code


@dataclass(frozen=True)
class ErasureConfig:
    """``turn_s``: how long one delivery of a request may carry its erasure (None: no
    limit); ``home``: the ingest partition of a conversation (None: a user erasure's
    second round of fences goes to every partition)."""

    idle_topic: str
    partitions: int
    fence_poll_s: float = 0.2
    retry_initial_s: float = 0.2
    retry_max_s: float = 10.0
    turn_s: float | None = 30.0
    home: Callable[[str], int] | None = None


class ErasureExecutor:
    def __init__(self, config: ErasureConfig, erasure_log: ErasureLog, tables: Deletes,
                 origins: Origins, builtin: BuiltinMemories, providers: ProviderRegistry,
                 cache: CachedConversations, publisher: Publisher, registry: ErasureRegistry,
                 locks: CubeLocks, *, chat_offsets: ChatOffsets,
                 clock: Callable[[], float] = time.time,
                 should_release: Callable[[], bool] = lambda: False,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.log = erasure_log
        self.tables = tables
        self.origins = origins
        self.cache = cache
        self.publisher = publisher
        self.registry = registry
        self.chat_offsets = chat_offsets
        self.clock = clock
        self.should_release = should_release
        self.monotonic = monotonic
        self._turn_ends: float | None = None
        self._deleted = False  # this turn deleted something
        self.copies = MemoryCopies(origins, tables, builtin, providers, locks, self._retry,
                                   stop=self.stop)

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    # ----------------------------------------------------------------- turns
    def start_turn(self) -> None:
        """A delivery of a request begins: its turn starts now (one erasure at a time)."""
        turn = self.config.turn_s
        self._turn_ends = None if turn is None else self.monotonic() + turn
        self._deleted = False

    def _released(self, waiting: bool = False) -> ReleaseReason | None:
        """Why the erasure must let the queue go now, if it must. A turn that is over
        ends at a wait, or once the turn has deleted something: a turn that only went
        over what earlier turns did is never cut short, so every turn makes progress
        or waits for something that has to come first."""
        if self.should_release():
            return "rebalance"
        if self._turn_ends is not None and self.monotonic() >= self._turn_ends \
                and (waiting or self._deleted):
            return "turn"
        return None

    def stop(self) -> bool:
        """Whether the erasure must let the queue go at its next checkpoint."""
        return self._released() is not None

    def checkpoint(self, *, waiting: bool = False) -> None:
        """Raise :class:`ErasureReleased` when the turn is over."""
        reason = self._released(waiting)
        if reason is not None:
            raise ErasureReleased(reason)

    async def pause(self, seconds: float) -> None:
        """Wait ``seconds``, a checkpoint at least every ``fence_poll_s``."""
        end = self.monotonic() + seconds
        while True:
            self.checkpoint(waiting=True)
            left = end - self.monotonic()
            if left <= 0:
                return
            await asyncio.sleep(min(left, self.config.fence_poll_s))

    async def _retry(self, what: str, call: Callable[[], Awaitable[object]]) -> None:
        """Until it passes, within the turn; a failure that is not :func:`transient` (a
        provider refusing for good, not configured, the database refusing a statement)
        stops the erasure where it is: it is marked blocked, and the same request
        starts it again."""
        self.checkpoint()
        await retry_forever(call, what=what, initial_s=self.config.retry_initial_s,
                            max_s=self.config.retry_max_s, sleep=self.pause,
                            give_up=lambda exc: not transient(exc))
        self.checkpoint()  # a call that stopped at a chunk for the turn left the rest

    # ------------------------------------------------------------------ flow
    async def erase(self, req: ErasureRequest) -> ErasureReceipt:
        """Carry ``req`` out (or continue it); its receipt. Transient failures are the
        caller's to retry (every step is idempotent)."""
        started = self.now()
        rec = await self.log.get(req.tenant_id, req.erasure_id)
        if rec is None:
            rec = await self._record(req)
        mark = rec.mark
        if (mark.target, mark.subject) != (req.target, req.subject):
            raise ErasureRefused("conflict", f"erasure_id {req.erasure_id!r} was used for "
                                 f"another erasure of this tenant ({mark.target})")
        self.registry.add(mark)
        if rec.status != "done":
            try:
                await self._carry_out(rec)
            except (ErasureReleased, ErasureRefused):
                raise
            except Exception as exc:
                if not transient(exc):
                    await self._blocked(mark, exc)
                raise
        return await self.receipt(req, mark.seq, started)

    async def _blocked(self, mark: ErasureMark, exc: Exception) -> None:
        """Record that ``exc`` stopped the erasure (its class and message, redacted; a
        database error's is its class and number, never a statement or a value); a
        failure to record it is only logged."""
        try:
            await self.log.set_status(mark.seq, "blocked", self.now(), error=error_text(exc))
        except Exception as failed:  # the receipt and the dead letter say it all the same
            log.warning("erasure %s: recording it blocked failed: %s", mark.erasure_id,
                        error_text(failed))

    async def receipt(self, req: ErasureRequest, seq: int,
                      started: datetime) -> ErasureReceipt:
        rec = await self.log.get(req.tenant_id, req.erasure_id)
        assert rec is not None
        counts = await self.log.counts(seq)
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
            source = MemorySource(first.cube, first.user_id, frozenset(first.source_event_ids),
                                  first.kind, first.span)
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
        if status in ("recorded", "blocked"):  # every step is idempotent: from the start
            await self.log.plan(mark.seq, await self._conversations(mark), self.now())
            status = "planned"
        if status == "planned":
            if mark.target != "memory":
                await self._fence(mark)
            if mark.target == "user":  # complete now: nothing it covers is stored any more
                await self.log.plan(mark.seq, await self._conversations(mark))
                await self._tombstones(mark)
            await self.log.set_status(mark.seq, "fenced", self.now())
        self.checkpoint()
        await self.log.set_status(mark.seq, "deleting", self.now())
        log.info("erasure %s: deleting (%s in tenant %r)", mark.erasure_id, mark.target,
                 mark.tenant_id)
        for _ in range(2):  # the second pass: what a run in flight wrote meanwhile
            # a partition may have stored a conversation more before its fence
            await self.log.plan(mark.seq, await self._conversations(mark))
            sel = selection(mark, await self.log.conversations(mark.seq))
            await self.copies.erase(sel, self._record_counts(mark.seq), self._count(mark.seq))
            await self._sub_agent_candidates(mark, sel)
            for step in self.tables.erasure_steps(sel):
                await self._table(mark, step)
            await self._redis(mark.seq, sel)
        await self.log.set_status(mark.seq, "done", self.now())
        self.registry.finished(mark.seq)
        counts = await self.log.counts(mark.seq)
        for store, n in counts.items():
            ERASED.labels(store).inc(n)
        log.info("erasure %s done: %d rows, keys and copies", mark.erasure_id,
                 sum(counts.values()))

    async def _conversations(self, mark: ErasureMark) -> list[EraseConversation]:
        if mark.target == "user":
            return await self.tables.user_conversations(mark.tenant_id, mark.subject)
        if mark.target == "conversation":  # and, for a sub-agent's, the parents it is in
            parents, _ = await self.tables.sub_agent_messages(mark.tenant_id, mark.subject)
            return [EraseConversation(mark.subject, True),
                    *(EraseConversation(p, False) for p in parents if p != mark.subject)]
        return []

    # ----------------------------------------------------------------- fence
    async def _fence(self, mark: ErasureMark, round: int = 1,
                     partitions: Iterable[int] | None = None) -> None:
        """Send the fence of ``round`` to the ingest partitions (by default every one)
        that have not passed it; wait, within the turn, until each has. A partition
        that does not pass it in time (stopped, or paused by a rebalance) gets it
        again at the next turn."""
        wanted = set(range(self.config.partitions) if partitions is None else partitions)
        todo = sorted(wanted - await self.log.fences(mark.seq, round))
        if not todo:
            return
        issued = self.now()
        fences = [Outgoing(self.config.idle_topic, f"erasure:{mark.seq}".encode(),
                           ErasureFence(
                               type="erasure_fence", seq=mark.seq, erasure_id=mark.erasure_id,
                               tenant_id=mark.tenant_id, target=mark.target,
                               subject=mark.subject, cutoff=mark.cutoff.replace(tzinfo=UTC),
                               chat_offsets=mark.chat_offsets, partition=p, issued_at=issued,
                               round=round).model_dump_json().encode(),
                           tracing.with_context(), partition=p)
                  for p in todo]
        await self._retry("erasure-fence", lambda: self.publisher.publish(fences))
        said = self.monotonic()
        while not wanted <= (passed := await self.log.fences(mark.seq, round)):
            await self.pause(self.config.fence_poll_s)
            if self.monotonic() - said >= FENCE_LOG_S:
                said = self.monotonic()
                log.info("erasure %s: waiting for ingest partitions %s to pass its fence",
                         mark.erasure_id, sorted(wanted - passed))

    async def _tombstones(self, mark: ErasureMark) -> None:
        """A user erasure's second round: the partitions holding a conversation only
        the user spoke in delete its session state, and those holding a group chat
        they spoke in rewrite its state to name them no more (from the recorded
        list)."""
        recorded = [c.conversation_id for c in await self.log.conversations(mark.seq)]
        if not recorded:
            return
        home = self.config.home
        homes = None if home is None else {home(c) for c in recorded}
        if homes is not None and not homes <= set(range(self.config.partitions)):
            homes = None  # the topics disagree on their partitions: ask every one
        await self._fence(mark, 2, homes)

    # ------------------------------------------------------------- deleting
    def _record_counts(self, seq: int) -> RecordCounts:
        async def record(conn: object, counts: dict[str, int]) -> None:
            await self.log.add_count(conn, seq, counts)
            self._deleted = self._deleted or any(counts.values())
        return record

    def _count(self, seq: int) -> Callable[[dict[str, int]], Awaitable[None]]:
        """Counts of what went outside the database, each in a transaction of its own."""
        async def count(counts: dict[str, int]) -> None:
            if any(counts.values()):
                await self.log.add_counts(seq, counts)
                self._deleted = True
        return count

    async def _sub_agent_candidates(self, mark: ErasureMark, sel: Selection) -> None:
        """A sub-agent conversation's messages were judged in their parents' runs: the
        candidates made from them go (the runs stay: they hold the parents' too)."""
        if sel.target != "conversation" or len(sel.touched) < 2:
            return
        parents, events = await self.tables.sub_agent_messages(sel.tenant_id, sel.subject)
        if events:
            record = self._record_counts(mark.seq)
            await self._retry("erase-candidates", lambda: self.tables.candidates_from(
                sel.tenant_id, parents, events, record))

    async def _table(self, mark: ErasureMark, step: DeleteStep) -> None:
        record = self._record_counts(mark.seq)
        done: list[int] = []

        async def run() -> None:
            done.append(await self.tables.delete(step, record, stop=self.stop))

        await self._retry(f"erase-{step.name}", run)
        if done[-1]:
            log.info("erasure %s: %d rows of %s", mark.erasure_id, done[-1], step.name)

    async def _redis(self, seq: int, sel: Selection) -> None:
        if not self.cache.enabled or sel.target == "memory":
            return

        async def forget() -> None:
            if sel.target == "tenant":
                n = await self.cache.forget_tenant(sel.tenant_id)
            else:
                n = await self.cache.forget([(sel.tenant_id, c) for c in sel.touched])
            await self._count(seq)({REDIS_KEYS: n})

        await self._retry("erase-redis", forget)

    # -------------------------------------------------------------- dry run
    async def dry_run(self, req: ErasureRequest) -> ErasureReceipt:
        """What ``req`` would delete, counted; nothing changes, nothing is recorded.
        Copies a provider holds that memstream has no id of are not counted (only the
        erasure's search of the provider finds them)."""
        started = self.now()
        mark = ErasureMark(req.erasure_id, req.tenant_id, req.target, req.subject,
                           naive_utc(started))
        if req.target == "memory":
            await self._locate(req)
        conversations = await self._conversations(mark)
        sel = selection(mark, conversations)
        counts = Counts()
        await self.copies.dry_run(sel, counts)
        for step in self.tables.erasure_steps(sel):
            counts.add(step.name, await self.tables.count(step))
        if req.target == "tenant":
            counts.add(REDIS_KEYS, await self.cache.forget_tenant(req.tenant_id, dry_run=True))
        elif req.target != "memory":
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
                     touched=tuple(c.conversation_id for c in conversations),
                     cutoff=mark.cutoff, seq=mark.seq)


def refusal(req: ErasureRequest | None, exc: ErasureRefused) -> ErasureReceipt:
    return ErasureReceipt(
        erasure_id=req.erasure_id if req else None, tenant_id=req.tenant_id if req else None,
        target=req.target if req else None, subject=req.subject if req else None,
        status="rejected", error=ErasureError(code=exc.code, message=str(exc)))
