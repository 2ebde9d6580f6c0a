"""The query consumer's read-ahead: requests read and not started yet, queued per
tenant, taken in turn (:mod:`streams.query.rules.fair_dispatch`).

A record is queued under the tenant of its key (``tenant/user``; a record whose
key names none under a queue of its own) unless that tenant's queue holds its
share of the read-ahead already (:func:`~streams.query.rules.fair_dispatch.queue_share`),
in records or — with ``read_ahead_bytes`` — in bytes (key and value; a tenant
with nothing queued always gets one request in): :meth:`TenantQueues.push` then
says no and the consumer sheds the request — only while another tenant was seen
within ``OTHERS_SEEN_S``, and never a request of the backlog a partition came
with (taken over after a worker's death or a rebalance: those waited already,
through no fault of their tenant's). A tenant alone is never shed: its requests
are queued past its share, and the consumer's bound on what it reads holds them.
:meth:`TenantQueues.next` hands out the next request to start, the tenants taken
in turn — the tenant served goes to the back of the turn — one tenant holding at
most half the slots while another waits — and at most ``contended_slots`` (never more
than that half), none borrowed, while ``busy`` says the loop is and another tenant
was seen within ``OTHERS_SEEN_S`` or holds or waits for a slot. Requests of
partitions let go are dropped (:meth:`TenantQueues.drop`), never started here.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from streams.query.rules.fair_dispatch import pick, queue_share, slot_share, tenant_of
from streams.wire.envelope import TPKey

OTHERS_SEEN_S = 5.0  # a tenant seen this recently counts as another one waiting
SEEN_MAX = 10_000  # tenants whose last request is remembered (the oldest go first)


def tp_of(r: Any) -> TPKey:
    return (r.topic, int(r.partition))


class TenantQueues:
    def __init__(self, read_ahead: int, slots: int, read_ahead_bytes: int = 0, *,
                 contended_slots: int = 0, busy: Callable[[], bool] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """``contended_slots`` 0 (or no ``busy``): slots are never shared as contended."""
        self.read_ahead = read_ahead
        self.clock = clock
        self.busy = busy
        self._seen: OrderedDict[str, float] = OrderedDict()  # tenant -> last request read
        self.read_ahead_bytes = read_ahead_bytes  # 0: no bound in bytes
        self._bytes: dict[str, int] = {}  # queued, by tenant
        self.slots = slots
        self.share = slot_share(slots)
        self.contended_share = min(contended_slots, self.share)
        self._queues: OrderedDict[str, deque[Any]] = OrderedDict()  # in turn order
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def queued_bytes(self) -> int:
        return sum(self._bytes.values())

    def push(self, r: Any, *, may_shed: bool = True) -> bool:
        """Queue the record under its tenant; False (nothing queued) when the tenant's
        queue holds its share of the read-ahead, another tenant was seen lately and
        ``may_shed`` (not a request of the backlog a partition came with)."""
        tenant = tenant_of(r.key)
        queue = self._queues.get(tenant)
        tenants = len(self._queues) + (queue is None)
        size = _size(r)
        others = self._others_seen(tenant)
        if may_shed and others and queue is not None and (
                len(queue) >= queue_share(self.read_ahead, tenants)
                or self._over_bytes(tenant, size, tenants)):
            return False
        if queue is None:
            queue = self._queues[tenant] = deque()
        queue.append(r)
        self._count += 1
        self._bytes[tenant] = self._bytes.get(tenant, 0) + size
        return True

    def _others_seen(self, tenant: str) -> bool:
        """Note ``tenant``'s request; whether another tenant's was read lately."""
        now = self.clock()
        self._seen[tenant] = now
        self._seen.move_to_end(tenant)
        while self._seen and (len(self._seen) > SEEN_MAX
                              or next(iter(self._seen.values())) < now - OTHERS_SEEN_S):
            self._seen.popitem(last=False)
        return len(self._seen) > 1

    def _over_bytes(self, tenant: str, size: int, tenants: int) -> bool:
        return bool(self.read_ahead_bytes) and self._bytes[tenant] + size > queue_share(
            self.read_ahead_bytes, tenants)

    def next(self, running: Mapping[str, int]) -> tuple[str, Any] | None:
        """The tenant and record to start in a free slot (``running``: slots held by
        tenant), or None when none may start now."""
        tenants = list(self._queues)
        if self._contended(running):
            i = pick(tenants, running, self.slots, self.contended_share, borrow=False)
        else:
            i = pick(tenants, running, self.slots, self.share)
        if i is None:
            return None
        tenant = tenants[i]
        queue = self._queues[tenant]
        r = queue.popleft()
        self._count -= 1
        if queue:
            self._queues.move_to_end(tenant)
            self._bytes[tenant] -= _size(r)
        else:
            del self._queues[tenant]
            del self._bytes[tenant]
        return tenant, r

    def _contended(self, running: Mapping[str, int]) -> bool:
        """Whether the loop is busy and another tenant active besides (a ``busy`` that
        fails says no: the consumer's loop must go on)."""
        if not self.contended_share or self.busy is None:
            return False
        try:
            if not self.busy():
                return False
        except Exception:
            return False
        return self._active(running, self.clock() - OTHERS_SEEN_S) > 1

    def _active(self, running: Mapping[str, int], since: float) -> int:
        """How many tenants are active (up to two: whether another is): holding or
        waiting for a slot, or seen since ``since``."""
        active = set(running) | set(self._queues)
        for tenant, at in reversed(self._seen.items()):
            if len(active) > 1 or at < since:
                break
            active.add(tenant)
        return len(active)

    def drop(self, tps: Iterable[TPKey] | None = None) -> int:
        """Drop the queued requests of ``tps`` (or all); how many were dropped."""
        gone = None if tps is None else set(tps)
        dropped = 0
        for tenant in list(self._queues):
            queue = self._queues[tenant]
            kept: deque[Any] = deque() if gone is None else deque(
                r for r in queue if tp_of(r) not in gone)
            dropped += len(queue) - len(kept)
            if kept:
                self._queues[tenant] = kept
                self._bytes[tenant] = sum(_size(r) for r in kept)
            else:
                del self._queues[tenant]
                del self._bytes[tenant]
        self._count -= dropped
        return dropped


def _size(r: Any) -> int:
    return len(r.key or b"") + len(r.value or b"")
