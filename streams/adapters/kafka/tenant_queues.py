"""The query consumer's read-ahead: requests read and not started yet, queued per
tenant, taken in turn (:mod:`streams.query.rules.fair_dispatch`).

A record is queued under the tenant of its key (``tenant/user``; a record whose
key names none under a queue of its own) unless that tenant's queue holds its
share of the read-ahead already (:func:`~streams.query.rules.fair_dispatch.queue_share`):
:meth:`TenantQueues.push` then says no and the consumer sheds the request.
:meth:`TenantQueues.next` hands out the next request to start, the tenants taken
in turn — the tenant served goes to the back of the turn — one tenant holding at
most half the slots while another waits. Requests of partitions let go are
dropped (:meth:`TenantQueues.drop`), never started here.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable, Mapping
from typing import Any

from streams.query.rules.fair_dispatch import pick, queue_share, slot_share, tenant_of
from streams.wire.envelope import TPKey


def tp_of(r: Any) -> TPKey:
    return (r.topic, int(r.partition))


class TenantQueues:
    def __init__(self, read_ahead: int, slots: int) -> None:
        self.read_ahead = read_ahead
        self.slots = slots
        self.share = slot_share(slots)
        self._queues: OrderedDict[str, deque[Any]] = OrderedDict()  # in turn order
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def push(self, r: Any) -> bool:
        """Queue the record under its tenant; False (nothing queued) when the tenant's
        queue holds its share of the read-ahead."""
        tenant = tenant_of(r.key)
        queue = self._queues.get(tenant)
        tenants = len(self._queues) + (queue is None)
        if queue is not None and len(queue) >= queue_share(self.read_ahead, tenants):
            return False
        if queue is None:
            queue = self._queues[tenant] = deque()
        queue.append(r)
        self._count += 1
        return True

    def next(self, running: Mapping[str, int]) -> tuple[str, Any] | None:
        """The tenant and record to start in a free slot (``running``: slots held by
        tenant), or None when none may start now."""
        tenants = list(self._queues)
        i = pick(tenants, running, self.slots, self.share)
        if i is None:
            return None
        tenant = tenants[i]
        queue = self._queues[tenant]
        r = queue.popleft()
        self._count -= 1
        if queue:
            self._queues.move_to_end(tenant)
        else:
            del self._queues[tenant]
        return tenant, r

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
            else:
                del self._queues[tenant]
        self._count -= dropped
        return dropped
