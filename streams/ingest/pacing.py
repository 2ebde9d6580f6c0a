"""EventPacer: a tenant over its quota of chat events is delayed, not dropped.

The ingest agent hands the pacer every record it reads, before the batch sink;
the pacer says which to take in now and holds the rest of an over-quota tenant,
releasing them as the tenant's quota (:class:`~streams.quotas.book.QuotaBook`,
``events``) has room again. Another tenant's records, on the same partition and
in the same batches, pass at once: one tenant's burst waits for that tenant
alone. Pure: the time is an argument; nothing here awaits.

Contract (items are a record and its handle, acknowledged by the caller; a
record whose value names no valid tenant id passes, to be refused by the
classifier):

* Weighed: a record of the chat topic (where an event is first read) whose
  tenant's over-quota action is ``delay`` (``delays(tenant)``). Every other
  record passes at once and is weighed, if at all, by the classifier
  (:meth:`weigh`, the ``dead_letter`` action).
* :meth:`admit` returns the records to take in now, in the order read, and the
  ones it holds (``held``, for the commit guard). A tenant with records held
  has every later record of it held behind them, unweighed: its records reach
  ingest in the order read, across its conversations.
* :meth:`due` releases held records, each tenant's in order, each taking a token
  of its quota; tenants are served in the order their quota has room.
  :meth:`next_in` says when one is due.
* Bounded in time: a record is held only if its tenant's quota will have room
  for it within ``max_wait_s`` (the records held before it go first), so the
  commit of its partition waits that long at most. Bounded in memory: at most
  ``max_held`` records and ``max_tenant_bytes`` of one tenant, ``max_bytes`` of
  every tenant's (a record counts its value and ``ITEM_BYTES``). A record past
  any bound is taken in to be dead-lettered ``over_quota`` (the classifier asks
  :meth:`weigh`); the tenant's later records are held again as there is room,
  so they stay in order behind what is held.
* :meth:`release` hands back every held record (a rebalance: the agent lets
  them go unacknowledged and Kafka delivers them again, from the commit the
  guard kept below them). Until :meth:`resume`, :meth:`admit` hands back every
  record of a tenant let go too (``let_go``): read after one let go, it must
  not be stored before that one is delivered again.

Counted per tenant (``memstream_quota_decisions_total{quota="events"}``), each
time a record is read: held, ``delayed``; taken in, at once or when released,
``allowed``; past the bounds, ``dead_lettered``.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from streams.quotas.book import ALLOWED, DEAD_LETTERED, DELAYED, QuotaBook
from streams.wire.decode import tenant_of
from streams.wire.envelope import SourceRecord

H = TypeVar("H")

RecordId = tuple[str, int, int]  # topic, partition, offset
Item = tuple[SourceRecord, H]
ITEM_BYTES = 1024  # what holding a record costs besides its value (its objects)
MIN_TURN_S = 0.001  # a tenant's next turn comes this long after the last at least
REFUSED_MAX = 100_000  # refusals taken in and not yet weighed: far more than a sink holds


def record_id(rec: SourceRecord) -> RecordId:
    return rec.topic, rec.partition, rec.offset


@dataclass(frozen=True, slots=True)
class Admitted(Generic[H]):
    """What :meth:`EventPacer.admit` decided: take ``ready`` in now (in order); ``held``
    are held back; hand ``let_go`` back unacknowledged (read after a record let go)."""

    ready: list[Item[H]]
    held: list[Item[H]] = field(default_factory=list)
    let_go: list[Item[H]] = field(default_factory=list)


@dataclass(slots=True)
class _Held(Generic[H]):
    items: deque[tuple[Item[H], int]] = field(default_factory=deque)  # (item, bytes)
    bytes: int = 0


class EventPacer(Generic[H]):
    """``quota``: the events quota; ``delays``: whether a tenant's records over it
    are delayed (else the classifier dead-letters them); ``chat_topic``: where
    records are weighed."""

    def __init__(self, quota: QuotaBook, *, delays: Callable[[str], bool], chat_topic: str,
                 max_wait_s: float, max_held: int, max_tenant_bytes: int,
                 max_bytes: int) -> None:
        if max_held < 1 or max_tenant_bytes < 1 or max_bytes < 1 or max_wait_s < 0:
            raise ValueError("the bounds of held records must be positive")
        self.quota = quota
        self.delays = delays
        self.chat_topic = chat_topic
        self.max_wait_s = max_wait_s
        self.max_held = max_held
        self.max_tenant_bytes = max_tenant_bytes
        self.max_bytes = max_bytes
        self._held: dict[str, _Held[H]] = {}
        self._turns: list[tuple[float, int, str]] = []  # (when room comes, tie, tenant)
        self._ties = 0
        self._count = 0
        self._bytes = 0
        self._refused: OrderedDict[RecordId, str] = OrderedDict()  # taken in, to dead-letter
        self._letting_go: set[str] | None = None  # tenants released, until resumed

    @property
    def held(self) -> int:
        """Records held, of every tenant."""
        return self._count

    def admit(self, items: Sequence[Item[H]], now: float) -> Admitted[H]:
        """The records of ``items`` to take in now; the rest are held (see the module
        docstring)."""
        out: Admitted[H] = Admitted([])
        for item in items:
            rec = item[0]
            tenant = tenant_of(rec.value) if rec.topic == self.chat_topic else None
            if tenant is None or not self.delays(tenant):
                out.ready.append(item)
            elif self._letting_go is not None and tenant in self._letting_go:
                out.let_go.append(item)
            elif tenant not in self._held and self.quota.take(tenant, now, count=False).allowed:
                self.quota.count(tenant, ALLOWED)
                out.ready.append(item)
            else:
                self._hold(tenant, item, now, out)
        return out

    def _hold(self, tenant: str, item: Item[H], now: float, out: Admitted[H]) -> None:
        size = len(item[0].value or b"") + ITEM_BYTES
        held = self._held.get(tenant)
        n, tenant_bytes = (len(held.items), held.bytes) if held is not None else (0, 0)
        why = None
        if n >= self.max_held or tenant_bytes + size > self.max_tenant_bytes:
            why = (f"{n} of its events ({tenant_bytes} bytes) are held already: at most "
                   f"{self.max_held} and {self.max_tenant_bytes} bytes of a tenant "
                   "(MEMSTREAM_QUOTAS__EVENTS_HELD_MAX, EVENTS_HELD_TENANT_BYTES)")
        elif self._bytes + size > self.max_bytes:
            why = (f"{self._bytes} bytes of every tenant's events are held already: at most "
                   f"{self.max_bytes} (MEMSTREAM_QUOTAS__EVENTS_HELD_BYTES)")
        elif (wait := self._wait(tenant, n + 1, now)) > self.max_wait_s:
            why = (f"its quota has room for it in {wait:.1f} s, after the {n} held before it: "
                   f"at most {self.max_wait_s:g} s (MEMSTREAM_QUOTAS__EVENTS_HELD_MAX_S)")
        if why is not None:
            self._refused[record_id(item[0])] = f"over the events quota of tenant {tenant!r}; {why}"
            while len(self._refused) > REFUSED_MAX:  # never weighed: let go, not read again
                self._refused.popitem(last=False)
            self.quota.count(tenant, DEAD_LETTERED)
            out.ready.append(item)
            return
        if held is None:
            held = self._held[tenant] = _Held()
            self._turn(tenant, now)
        held.items.append((item, size))
        held.bytes += size
        self._count += 1
        self._bytes += size
        self.quota.count(tenant, DELAYED)
        out.held.append(item)

    def _wait(self, tenant: str, nth: int, now: float) -> float:
        """Seconds until the tenant's quota has room for its ``nth`` record held."""
        rate = self.quota.limit(tenant).rate
        tokens = self.quota.tally(tenant, now).tokens
        return max(0.0, (nth - tokens) / rate) if rate > 0 else 0.0

    def _turn(self, tenant: str, now: float) -> None:
        """The tenant's next turn: when its quota has room, and never ``now`` itself (a
        refusal by less than a clock's tick would otherwise come round at once)."""
        self._ties += 1
        at = now + max(self.quota.peek(tenant, now).retry_after_s, MIN_TURN_S)
        heapq.heappush(self._turns, (at, self._ties, tenant))

    def due(self, now: float) -> list[Item[H]]:
        """Held records whose tenant's quota has room at ``now``, each tenant's in order;
        each tenant due is served once a call."""
        due: list[str] = []
        while self._turns and self._turns[0][0] <= now:
            _, _, tenant = heapq.heappop(self._turns)
            if tenant in self._held and tenant not in due:  # else let go meanwhile
                due.append(tenant)
        out: list[Item[H]] = []
        for tenant in due:
            held = self._held[tenant]
            while held.items and self.quota.take(tenant, now, count=False).allowed:
                self.quota.count(tenant, ALLOWED)
                item, size = held.items.popleft()
                held.bytes -= size
                self._count -= 1
                self._bytes -= size
                out.append(item)
            if held.items:
                self._turn(tenant, now)
            else:
                del self._held[tenant]
        return out

    def next_in(self, now: float) -> float | None:
        """Seconds until a held record is due (0: now); None when nothing is held."""
        while self._turns and self._turns[0][2] not in self._held:
            heapq.heappop(self._turns)
        return max(0.0, self._turns[0][0] - now) if self._turns else None

    def weigh(self, rec: SourceRecord, tenant: str, now: float) -> str | None:
        """The classifier's question for a chat event it takes in: None to store it,
        else why it is over quota (dead-lettered ``over_quota``). A delaying tenant's
        record was weighed by :meth:`admit` (refused only past the bounds)."""
        if self.delays(tenant):
            return self._refused.pop(record_id(rec), None)
        decision = self.quota.take(tenant, now)
        return None if decision.allowed else decision.message

    def release(self) -> list[Item[H]]:
        """Every held record, in the order read; until :meth:`resume`, a later record
        of their tenants is let go too."""
        out = [item for held in self._held.values() for item, _ in held.items]
        self._letting_go = (self._letting_go or set()) | set(self._held)
        self._held.clear()
        self._turns.clear()
        self._count = self._bytes = 0
        return out

    def resume(self) -> None:
        """Hold and take in records as before (after :meth:`release`)."""
        self._letting_go = None
