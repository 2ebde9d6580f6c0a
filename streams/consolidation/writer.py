"""MemoryWriter: conflicts, then write new, then expire old, resumable at every step.

For one run with persisted candidates (:class:`~.ports.Runs`), per cube, steps 1
and 2 under the cube's lock (:class:`~streams.memory.cube_locks.CubeLocks`, one per tenant,
cube and — for ``user_profile`` — user, across workers), on the cube's candidates as read
again inside it:

1. **decide** the candidates not decided yet: the provider's own search for each
   among the cube's facts (episodes never count as saying the same or the
   opposite, and never crowd a fact out), by the candidate's words and by its
   subjects (:func:`~streams.consolidation.rules.subjects.subject_keys`: "I moved
   to Lisbon" finds "I live in Porto" though no word is shared), then
   one :class:`~streams.consolidation.judge.ConflictDecider` call for the
   cube's batch. With a model, that call is made before the lock is taken
   (no lock is held across a model call) and used inside it only when the
   same searches, run again there, find the same memories
   (:mod:`.rules.ahead`); otherwise the lock is let go and the cube decided
   again, at most ``model_rounds`` times, then by the rules inside the lock.
   The decisions are persisted before anything is written, so a
   retry that finds them written does not decide again. A decision persisted
   in an earlier hold of the lock and not written yet (the attempt stopped) was
   made on what the cube held then: when the search now finds a memory saying
   the same, stored meanwhile by another run, it becomes a skip (decider
   ``recheck``); otherwise it is decided again with the others, so a memory
   another run stored meanwhile that it contradicts (or that contradicts it)
   is seen, as it would be had the runs not overlapped;
2. **write** what is to be stored: the write intent is recorded, the lock
   confirmed, the provider called, the returned id recorded. A provider that
   stores a batch atomically gets the cube's batch in calls of at most
   ``write_chunk`` memories, the others one memory per call;
3. **expire** what a written memory supersedes, only after it was written
   (outside the lock: a later decision seeing both memories valid skips or
   supersedes as it would after the expiry). A failing expiry is handed to the
   pending-expiry table and retried later.

Inside each lock, before anything else, the cube's rows whose user an erasure
covers (the profile's user; in an agent cube, the speaker each row comes from)
are dropped from the run: an erasure deletes a cube's memories under the same
lock, so a run either wrote them before (they go with the rest) or writes
nothing of them, whichever user closed the session.

Two runs of one cube therefore decide one after the other, each seeing what
the other wrote, as far as the provider's search reflects its writes: at once
for the built-in provider; for MemOS and Mem0, when their index has taken the
write in.

A candidate with a write intent but no id (the attempt stopped during or
right after the provider call) is first looked up with the provider's search:
a memory with the same text and source events is adopted instead of writing
it again. The remaining window: a provider that stored the memory but does not
return it from search yet (an asynchronous index) gets it a second time. A
provider whose ``add`` is idempotent itself (the built-in one: same text and
sources, same row) needs neither the intent nor the lookup.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from streams import tracing
from streams.consolidation.judge import ConflictDecider, decider_of
from streams.consolidation.model import CandidateRow, Origin, Retired, Run
from streams.consolidation.ports import ChatCompleter, Expiries, ModelCaller, Runs
from streams.consolidation.rules.ahead import Ahead, rounds_left, seen, still_holds
from streams.consolidation.rules.conflicts import Decision, own_copy, stored_meanwhile
from streams.consolidation.rules.subjects import subject_keys
from streams.memory.cube_locks import CubeLocks, HeldCube
from streams.memory.model import CubeKey, MemoryCandidate, StoredMemory, cube_key
from streams.memory.provider import PermanentProviderError, ProviderError, Scope, SearchRequest
from streams.memory.registry import ProviderHandle
from streams.metrics import MEMORIES_EXPIRED, MEMORIES_STORED
from streams.redaction import error_text

log = logging.getLogger(__name__)
RECHECK_DECIDER = "recheck"
# the memories a run's conflict checks must not see in a cube (a reprocess job's
# memories it is replacing); the run, the cube, the user it is written for
HiddenMemories = Callable[[Run, str, str], Awaitable[set[str]]]
# which of the users an erasure covers in the run's session (asked under a cube's lock)
ErasedUsers = Callable[[Collection[str]], Awaitable[Collection[str]]]


@dataclass
class WriteStats:
    written: int = 0
    adopted: int = 0
    skipped: int = 0
    expired: int = 0
    expiries_pending: int = 0
    model_calls: int = 0


def provider_scope(run: Run, user_id: str | None = None) -> Scope:
    return Scope(run.tenant_id, user_id or run.user_id, run.agent_id)


def _by_cube(run: Run, rows: Sequence[CandidateRow]) -> dict[CubeKey, list[CandidateRow]]:
    """The rows by the cube each is written to: a ``user_profile`` row goes to the
    profile of the user it is attributed to, so one run may write several."""
    out: dict[CubeKey, list[CandidateRow]] = defaultdict(list)
    for r in rows:
        out[cube_key(run.tenant_id, r.cube, r.owner(run))].append(r)
    return out


def same_memory(row: CandidateRow, stored: StoredMemory) -> bool:
    """Whether ``stored`` is the memory ``row`` would write (text and sources), as
    stored by an attempt that had started writing it."""
    return own_copy(row.candidate, stored, write_started=True)


def indexed(candidate: MemoryCandidate) -> MemoryCandidate:
    """A fact with its subjects, so that a later correction's lookup finds it."""
    if candidate.kind != "fact":
        return candidate
    return replace(candidate, subjects=subject_keys(candidate.content))


def _unwritten(row: CandidateRow) -> bool:
    return row.action in ("store", "supersede") and row.memory_id is None


def _to_decide(row: CandidateRow) -> bool:
    """Undecided, or decided in an earlier hold and (a fact, not being written) to be
    decided again unless the lock's re-check skips it."""
    return row.action is None or (_unwritten(row) and row.candidate.kind == "fact"
                                  and not row.write_started)


class MemoryWriter:
    def __init__(self, runs: Runs, expiries: Expiries, decider: ConflictDecider,
                 locks: CubeLocks, *, top_k: int = 5, relativity: float = 0.0,
                 expiry_retry_s: float = 30.0, clock: Callable[[], float] = time.time,
                 hidden: HiddenMemories | None = None, write_chunk: int = 100,
                 model_rounds: int = 2) -> None:
        if write_chunk < 1:
            raise ValueError("write_chunk must be at least 1")
        self.model_rounds = model_rounds
        self.hidden = hidden
        self.write_chunk = write_chunk
        self.runs = runs
        self.locks = locks
        self.expiries = expiries
        self.decider = decider
        self.top_k = top_k
        self.relativity = relativity
        self.expiry_retry_s = expiry_retry_s
        self.clock = clock

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    async def write(self, run: Run, handle: ProviderHandle, model: ChatCompleter | None,
                    rows: Sequence[CandidateRow], *,
                    erased: ErasedUsers | None = None,
                    caller: ModelCaller | None = None) -> WriteStats:
        """Decide, write and expire; ``rows`` as persisted. Each cube with anything
        left to decide or write is done under the cube's lock, on its rows as read
        again inside the lock (another attempt of this run may have recorded steps).
        ``erased``, asked inside each lock about the users the cube's rows belong to
        (the profile's user; in an agent cube, each speaker): the rows of a user an
        erasure covers are dropped from the run and nothing of theirs is written (an
        erasure deletes a cube's memories under the same lock), the others are.
        ``caller``: whom the model's conflict decisions are counted for (by default the
        run's tenant and agent)."""
        stats = WriteStats()
        caller = caller or ModelCaller(run.tenant_id, run.agent_id)
        current = {r.seq: r for r in rows}
        for key, cube_rows in _by_cube(run, rows).items():
            if not any(r.action is None or _unwritten(r) for r in cube_rows):
                stats.skipped += sum(1 for r in cube_rows if r.action == "skip")
                continue
            scope = provider_scope(run, cube_rows[0].owner(run))
            with tracing.span("memory cube write", {"memstream.cube": key.cube,
                                                    "memstream.candidates": len(cube_rows)}):
                fresh = await self._cube(run, handle, model, scope, key, stats, erased, caller)
            kept = {r.seq for r in fresh}
            for r in cube_rows:
                if r.seq not in kept:  # dropped: an erasure covers its user
                    current.pop(r.seq, None)
            current.update((r.seq, r) for r in fresh)
            stats.skipped += sum(1 for r in fresh if r.action == "skip")
        for r in current.values():
            if r.action == "supersede" and r.memory_id and not r.expired:
                with tracing.span("memory expiry"):
                    await self._expire(run, handle, provider_scope(run, r.owner(run)), r,
                                       stats)
        return stats

    async def _cube(self, run: Run, handle: ProviderHandle, model: ChatCompleter | None,
                    scope: Scope, key: CubeKey, stats: WriteStats,
                    erased: ErasedUsers | None, caller: ModelCaller) -> list[CandidateRow]:
        """One cube: decided ahead (with a model), then under the lock; again while what
        was decided ahead no longer holds. The cube's rows as recorded."""
        round_ = 0
        while True:
            ahead = None
            if rounds_left(round_, self.model_rounds, model is not None):
                ahead = await self._decide_ahead(run, handle, model, scope, key.cube, caller)
                stats.model_calls += ahead.model_calls
            async with self.locks.hold(key) as held:
                if erased is not None:
                    await self._drop_erased(run, scope, key.cube, erased)
                fresh = await self._in_lock(run, handle, scope, key.cube, held, stats,
                                            ahead, last=ahead is None)
            if fresh is not None:
                return fresh
            log.info("run %s: what %s held changed since its decision; deciding again",
                     run.closed_id, key.cube)
            round_ += 1

    async def _drop_erased(self, run: Run, scope: Scope, cube: str,
                           erased: ErasedUsers) -> None:
        """Inside the cube's lock: drop the cube's rows whose user an erasure covers."""
        rows = await self._cube_rows(run, scope, cube)
        gone = set(await erased({r.owner(run) for r in rows}))
        doomed = [r.seq for r in rows if r.owner(run) in gone]
        if doomed:
            await self.runs.drop(run.closed_id, doomed)
            log.info("run %s: %d candidates of %s dropped, their users erased meanwhile",
                     run.closed_id, len(doomed), cube)

    async def _ours(self, run: Run, scope: Scope, cube: str,
                    rows: Sequence[CandidateRow]) -> set[str]:
        """The memories the run's conflict checks do not count: its own, and hidden ones."""
        ours = {r.memory_id for r in rows if r.memory_id}
        if self.hidden is not None:
            ours |= await self.hidden(run, cube, scope.user_id)
        return ours

    async def _decide_ahead(self, run: Run, handle: ProviderHandle, model: ChatCompleter | None,
                            scope: Scope, cube: str, caller: ModelCaller) -> Ahead:
        """The cube's decisions, made without its lock, on what the search finds now."""
        rows = await self._cube_rows(run, scope, cube)
        pending = sorted((r for r in rows if _to_decide(r)), key=lambda r: r.seq)
        if not pending:
            return Ahead((), (), ())
        existing = await self._existing(handle, scope, cube, pending,
                                        await self._ours(run, scope, cube, rows), rows)
        with tracing.span("conflict decision", {"memstream.cube": cube,
                                                "memstream.candidates": len(pending)}):
            decisions, calls = await self.decider.decide(
                model, cube, [r.candidate for r in pending], existing, caller=caller)
        return Ahead(tuple(r.seq for r in pending), tuple(decisions), seen(existing), calls)

    async def _in_lock(self, run: Run, handle: ProviderHandle, scope: Scope, cube: str,
                       held: HeldCube, stats: WriteStats, ahead: Ahead | None, *,
                       last: bool) -> list[CandidateRow] | None:
        """The critical section of one cube: re-check the decisions of an earlier hold,
        decide the others (as decided ``ahead`` when that still holds; by the rules
        when ``last``), write. Returns the cube's rows as recorded, or None when the
        decisions made ahead no longer hold (nothing written)."""
        rows = await self._cube_rows(run, scope, cube)
        current = {r.seq: r for r in rows}
        ours = await self._ours(run, scope, cube, rows)
        earlier = [r for r in rows if _unwritten(r) and r.candidate.kind == "fact"]
        recorded = await self._recheck(run, handle, scope, cube, earlier, ours, current)
        # the other decisions of an earlier hold that were not written were made on
        # what the cube held then: another run may have stored a memory they
        # contradict, or one that contradicts them, since; they are decided again
        stale = [current[r.seq] for r in earlier
                 if _unwritten(current[r.seq]) and not current[r.seq].write_started]
        if stale:
            reopened = await self.runs.reopen_unwritten(run.closed_id, [r.seq for r in stale])
            recorded = recorded and reopened == len(stale)
            for r in stale:
                current[r.seq] = replace(r, action=None, expire_ids=(), decider=None)
        undecided = sorted((r for r in current.values() if r.action is None),
                           key=lambda r: r.seq)
        if undecided:
            existing = await self._existing(handle, scope, cube, undecided, ours,
                                            list(current.values()))
            if still_holds(ahead, [r.seq for r in undecided], existing):
                assert ahead is not None
                decisions = list(ahead.decisions)
            elif last:
                decisions, _ = await self.decider.decide(
                    None, cube, [r.candidate for r in undecided], existing)
            else:
                return None
            recorded = recorded and await self._save(run, undecided, decisions, current)
        if not recorded:  # another attempt recorded first (it held the lock, then lost it)
            current = {r.seq: r for r in await self._cube_rows(run, scope, cube)}
        if not await self._write_cube(run, handle, scope, cube, list(current.values()), stats,
                                      current, held):
            current = {r.seq: r for r in await self._cube_rows(run, scope, cube)}
        return list(current.values())

    async def _cube_rows(self, run: Run, scope: Scope, cube: str) -> list[CandidateRow]:
        """The run's rows of ``cube`` as written for ``scope``'s user, read again."""
        return [r for r in await self.runs.candidates(run.closed_id, cube)
                if cube_key(run.tenant_id, cube, r.owner(run))
                == cube_key(run.tenant_id, cube, scope.user_id)]

    async def _recheck(self, run: Run, handle: ProviderHandle, scope: Scope, cube: str,
                       earlier: list[CandidateRow], exclude: set[str],
                       current: dict[int, CandidateRow]) -> bool:
        """Skip what another run stored since these were decided; False when another
        attempt recorded first."""
        if not earlier:
            return True
        found = await asyncio.gather(
            *(self._related(handle, scope, cube, r, exclude) for r in earlier))
        skips = []
        for r, mems in zip(earlier, found, strict=True):
            ids = stored_meanwhile(r.candidate, mems, write_started=r.write_started,
                                   duplicate_threshold=self.decider.duplicate_threshold)
            if ids:
                skips.append((r, f"stored meanwhile as {', '.join(ids)}"))
        n = await self.runs.skip_unwritten(run.closed_id, [(r.seq, why) for r, why in skips],
                                           RECHECK_DECIDER)
        for r, why in skips:
            current[r.seq] = replace(r, action="skip", expire_ids=(), decider=RECHECK_DECIDER)
            log.info("run %s: %r was %s; skipped", run.closed_id, r.candidate.content, why)
        return n == len(skips)

    async def _related(self, handle: ProviderHandle, scope: Scope, cube: str,
                       row: CandidateRow, exclude: set[str]) -> list[StoredMemory]:
        # what is excluded may fill the top: ask for as many more (up to a bound)
        extra = min(len(exclude), 4 * self.top_k) if self.hidden is not None else 0
        found = await handle.provider.search(scope, SearchRequest(
            query=row.candidate.content, cubes=[cube], top_k=self.top_k + extra,
            relativity=self.relativity, include_preference=True, dedup=False,
            kinds=("fact",), subjects=subject_keys(row.candidate.content)))
        return [m for m in found if m.kind == "fact" and m.id not in exclude][:self.top_k]

    async def _existing(self, handle: ProviderHandle, scope: Scope, cube: str,
                        undecided: Sequence[CandidateRow], exclude: set[str],
                        rows: Sequence[CandidateRow]) -> list[list[StoredMemory]]:
        """What each candidate is decided against: the stored facts the search finds."""
        found = await asyncio.gather(
            *(self._related(handle, scope, cube, r, exclude) for r in undecided))
        # what an earlier attempt of this run wrote without recording it (a provider
        # whose add is idempotent records nothing before the call) is no other memory
        return [[m for m in mems if not any(
            own_copy(x.candidate, m, write_started=x.write_started) for x in rows)]
            for mems in found]

    async def _save(self, run: Run, undecided: Sequence[CandidateRow],
                    decisions: Sequence[Decision], current: dict[int, CandidateRow]) -> bool:
        """Record the decisions; whether every one was recorded by this attempt."""
        saved = await self.runs.save_decisions(run.closed_id, [
            (r.seq, d.action, d.expire_ids, decider_of(d), d.reason)
            for r, d in zip(undecided, decisions, strict=True)])
        for r, d in zip(undecided, decisions, strict=True):
            current[r.seq] = replace(r, action=d.action, expire_ids=tuple(d.expire_ids),
                                     decider=decider_of(d))
        return saved == len(undecided)

    async def _adopt(self, handle: ProviderHandle, scope: Scope, cube: str,
                     row: CandidateRow) -> str | None:
        found = await handle.provider.search(scope, SearchRequest(
            query=row.candidate.content, cubes=[cube], top_k=max(self.top_k, 10),
            relativity=0.0, include_preference=True, dedup=False))
        match = next((m for m in found if same_memory(row, m)), None)
        return match.id if match else None

    async def _write_cube(self, run: Run, handle: ProviderHandle, scope: Scope,
                          cube: str, rows: Sequence[CandidateRow], stats: WriteStats,
                          current: dict[int, CandidateRow], held: HeldCube) -> bool:
        """Write the cube's pending memories, each call after confirming the lock is
        still held; False when another attempt recorded some of them first."""
        pending = [r for r in rows if r.action in ("store", "supersede") and r.memory_id is None]
        fresh: list[CandidateRow] = []
        recorded = True
        for r in pending:
            adopted = (await self._adopt(handle, scope, cube, r)
                       if r.write_started and not handle.idempotent_add else None)
            if adopted is not None:
                n = await self.runs.mark_written(run.closed_id, [(r.seq, adopted)], self._now(),
                                                 [Origin(run, r, adopted)])
                recorded = recorded and n == 1
                current[r.seq] = replace(r, memory_id=adopted)
                stats.adopted += 1
                log.info("run %s: memory %s was already stored; adopted", run.closed_id, adopted)
            else:
                fresh.append(r)
        step = self.write_chunk if handle.atomic_batch else 1
        batches = [fresh[i:i + step] for i in range(0, len(fresh), step)]
        for batch in batches:
            seqs = [r.seq for r in batch]
            if not handle.idempotent_add:
                await self.runs.mark_write_started(run.closed_id, seqs, self._now())
            await held.confirm()
            result = await handle.provider.add(scope, cube, [indexed(r.candidate) for r in batch])
            if len(result.ids) != len(batch):
                raise PermanentProviderError(
                    f"{handle.route} add returned {len(result.ids)} ids for {len(batch)} memories",
                    provider=handle.route, operation="add")
            n = await self.runs.mark_written(
                run.closed_id, list(zip(seqs, result.ids, strict=True)), self._now(),
                [Origin(run, r, i) for r, i in zip(batch, result.ids, strict=True)])
            recorded = recorded and n == len(batch)
            for r, memory_id in zip(batch, result.ids, strict=True):
                current[r.seq] = replace(r, memory_id=memory_id)
                MEMORIES_STORED.labels(handle.route, r.candidate.type).inc()
            stats.written += len(batch)
        return recorded

    async def _expire(self, run: Run, handle: ProviderHandle, scope: Scope,
                      row: CandidateRow, stats: WriteStats) -> None:
        if not row.expire_ids:
            await self.runs.mark_expired(run.closed_id, row.seq, self._now())
            return
        try:
            await handle.provider.expire(scope, row.cube, list(row.expire_ids), row.memory_id)
        except ProviderError as exc:
            log.warning("run %s: expiring %s failed, left for the sweeper: %s",
                        run.closed_id, list(row.expire_ids), exc)
            await self.expiries.hand_over(run, row, error_text(exc), self._now(),
                                          self.expiry_retry_s)
            stats.expiries_pending += 1
            return
        MEMORIES_EXPIRED.labels(handle.route).inc(len(row.expire_ids))
        await self.runs.mark_expired(run.closed_id, row.seq, self._now(), retired=Retired(
            run.tenant_id, run.provider, row.expire_ids))
        stats.expired += len(row.expire_ids)
