"""Consolidation slots: how many runs a worker does at once, each tenant's share of
them, and cube-lock waits that hold none.

:class:`TenantSlots` hands out ``slots`` places to runs (:meth:`TenantSlots.hold`),
at most ``share`` to one tenant, picking among the waiting runs by
:func:`.rules.fairness.pick`. A run over its tenant's share waits without
holding a slot, so one tenant's backlog leaves the others' runs a place.

:class:`SlotFreeLocks` wraps the cube locks a run's writes take: a run that has
not got a cube's lock within ``grace_s`` gives its slot up for the rest of the
wait (another run, of any tenant, uses it meanwhile) and takes one back once it
holds the lock, ahead of the runs that have not started. A run holding a slot
is therefore always working — never waiting for another run's cube — so a cube
held elsewhere for long (a provider down under a run holding it) stops only
the runs that write to it. A run whose wait fails (the lock's timeout) goes on
without a slot to hand its event on. Runs of one cube queue in the process
first; then at most ``waits`` runs hold or wait for a cube's lock at once (each
with a database connection, on MySQL), one tenant's at most its share of them;
the others queue for that in the process, holding neither a slot nor a
connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from streams.consolidation.rules.fairness import Waiting, over_share, pick, tenant_share
from streams.memory.cube_locks import CubeLocks, CubeLockTimeout, HeldCube, KeyedLocks
from streams.memory.model import CubeKey
from streams.quotas.counts import CountQuota


@dataclass
class _Waiter:
    who: Waiting
    granted: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())
    passed_over: bool = False  # counted refused by the quota


@dataclass
class Slot:
    """A run's place: its tenant, and whether it holds the slot now."""

    slots: TenantSlots
    tenant: str
    holding: bool = True

    def give(self) -> None:
        """Let another run have the slot (this run waits for something else)."""
        if self.holding:
            self.holding = False
            self.slots.release(self.tenant)

    async def take_back(self) -> None:
        """Take a slot again, ahead of the runs that have not started."""
        if not self.holding:
            await self.slots.acquire(self.tenant, resuming=True)
            self.holding = True


_CURRENT: ContextVar[Slot | None] = ContextVar("consolidation_slot", default=None)


def current_slot() -> Slot | None:
    """The slot the running task holds, if it took one."""
    return _CURRENT.get()


class TenantSlots:
    """``slots`` runs at once, a tenant's at most its share: ``shares[tenant]`` or
    ``share`` (each as :func:`~.rules.fairness.tenant_share` reads it). With ``quota``
    (``sessions_consolidating``) each run is counted once: allowed when it takes a
    slot, refused when it is first passed over because its tenant holds its share."""

    def __init__(self, slots: int, share: int = 0, *, shares: Mapping[str, int] | None = None,
                 quota: CountQuota | None = None) -> None:
        self.slots = slots
        self.share = tenant_share(slots, share)
        self.shares = {t: tenant_share(slots, n) for t, n in (shares or {}).items()}
        self.quota = quota
        self.running: dict[str, int] = {}
        self._waiting: list[_Waiter] = []

    def share_of(self, tenant: str) -> int:
        return self.shares.get(tenant, self.share)

    @property
    def in_use(self) -> int:
        return sum(self.running.values())

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    @asynccontextmanager
    async def hold(self, tenant: str) -> AsyncIterator[Slot]:
        """A slot for one run of ``tenant``, for the block (the task's current slot)."""
        await self.acquire(tenant)
        slot = Slot(self, tenant)
        token = _CURRENT.set(slot)
        try:
            yield slot
        finally:
            _CURRENT.reset(token)
            slot.give()

    async def acquire(self, tenant: str, *, resuming: bool = False) -> None:
        """Wait for a slot; :meth:`release` it afterwards."""
        waiter = _Waiter(Waiting(tenant, resuming))
        self._waiting.append(waiter)
        self._dispatch()
        try:
            await waiter.granted
        except asyncio.CancelledError:
            if waiter in self._waiting:
                self._waiting.remove(waiter)
            elif waiter.granted.done() and not waiter.granted.cancelled():
                self.release(tenant)  # granted as it was cancelled
            raise

    def release(self, tenant: str) -> None:
        n = self.running.get(tenant, 0) - 1
        if n > 0:
            self.running[tenant] = n
        else:
            self.running.pop(tenant, None)
        self._dispatch()

    def _dispatch(self) -> None:
        while (i := pick([w.who for w in self._waiting], self.running, self.slots,
                         self.share, self.shares)) is not None:
            waiter = self._waiting.pop(i)
            if waiter.granted.done():  # cancelled while waiting
                continue
            self.running[waiter.who.tenant] = self.running.get(waiter.who.tenant, 0) + 1
            waiter.granted.set_result(None)
            if self.quota is not None and not waiter.who.resuming:
                self.quota.record(waiter.who.tenant, True)
        if self.quota is None:
            return
        for waiter in self._waiting:
            if not waiter.passed_over and not waiter.who.resuming and over_share(
                    waiter.who.tenant, self.running, self.share, self.shares):
                waiter.passed_over = True
                self.quota.record(waiter.who.tenant, False)


class SlotFreeLocks:
    """``CubeLocks`` whose waits beyond ``grace_s`` do not hold the waiting run's slot."""

    def __init__(self, inner: CubeLocks, *, grace_s: float = 0.05, waits: int = 8,
                 share: int = 0) -> None:
        self.inner = inner
        self.timeout_s = inner.timeout_s
        self.grace_s = grace_s
        self.waits = TenantSlots(waits, share)
        self._queue = KeyedLocks()

    @asynccontextmanager
    async def _lock(self, key: CubeKey) -> AsyncIterator[HeldCube]:
        """``key``'s lock: behind the process's other runs of the cube, then within
        the lock waits' bound; :class:`CubeLockTimeout` after ``timeout_s``."""
        async with AsyncExitStack() as stack:
            try:
                await stack.enter_async_context(self._queue.hold(repr(key), self.timeout_s))
                async with asyncio.timeout(self.timeout_s):
                    await self.waits.acquire(key.tenant_id)
            except TimeoutError:
                raise CubeLockTimeout(f"waited {self.timeout_s:g}s for the lock of {key} "
                                      "in this worker") from None
            stack.callback(self.waits.release, key.tenant_id)
            yield await stack.enter_async_context(self.inner.hold(key))

    @asynccontextmanager
    async def hold(self, key: CubeKey) -> AsyncIterator[HeldCube]:
        slot = current_slot()
        async with AsyncExitStack() as stack:
            if slot is None or not slot.holding:
                yield await stack.enter_async_context(self._lock(key))
                return
            timer = asyncio.get_running_loop().call_later(self.grace_s, slot.give)
            try:
                held = await stack.enter_async_context(self._lock(key))
            finally:
                timer.cancel()
            await slot.take_back()
            yield held
