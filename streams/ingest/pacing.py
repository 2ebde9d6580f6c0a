"""EventPacer: a tenant over its quota of chat events is delayed, not dropped.

The ingest agent hands the pacer every record it reads, before the batch sink;
the pacer says which to take in now and holds the rest of an over-quota tenant,
releasing them as the tenant's quota (:class:`~streams.quotas.book.QuotaBook`,
``events``) has room again. Another tenant's records, on the same partition and
in the same batches, pass at once: one tenant's burst waits for that tenant
alone. Pure: the time is an argument; nothing here awaits.

Contract (items are a record and its handle, acknowledged by the caller; a
record whose value names no tenant passes, to be refused by the classifier):

* Weighed: a record of the chat topic (where an event is first read) whose
  tenant's over-quota action is ``delay`` (``delays(tenant)``). Every other
  record passes at once and is weighed, if at all, by the classifier
  (:meth:`weigh`, the ``dead_letter`` action).
* :meth:`admit` returns the records to take in now, in the order read. A tenant
  with records held has every later record of it held behind them, unweighed:
  its records reach ingest in the order read, across its conversations.
* :meth:`due` releases held records, each tenant's in order, each taking a token
  of its quota; tenants take turns. :meth:`next_in` says when one is due.
* Bounded: at most ``max_held`` records of one tenant and ``max_bytes`` of every
  tenant's are held. A record past either is taken in to be dead-lettered
  ``over_quota`` (the classifier asks :meth:`weigh`, which weighs a record the
  pacer did not take in itself, dead-lettering it over the quota); the tenant's later
  records are held again as there is room, so they stay in order behind what
  is held.
* :meth:`release` hands back every held record (a rebalance: the agent lets
  them go unacknowledged and Kafka delivers them again, from the commit the
  guard kept below them). Until :meth:`resume`, :meth:`admit` hands back every
  record of a tenant let go too (``let_go``): read after one let go, it must
  not be stored before that one is delivered again.

Counted per tenant (``memstream_quota_decisions_total{quota="events"}``): a
record held, ``delayed``; one taken in, at once or when released, ``allowed``;
one past the bounds, ``dead_lettered``.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from streams.quotas.book import ALLOWED, DEAD_LETTERED, DELAYED, QuotaBook
from streams.wire.decode import tenant_of
from streams.wire.envelope import SourceRecord

H = TypeVar("H")

RecordId = tuple[str, int, int]  # topic, partition, offset
PASSED_MAX = 100_000  # records taken in and not yet weighed by the classifier, at most
Item = tuple[SourceRecord, H]


def record_id(rec: SourceRecord) -> RecordId:
    return rec.topic, rec.partition, rec.offset


@dataclass(frozen=True, slots=True)
class Admitted(Generic[H]):
    """What :meth:`EventPacer.admit` decided: take ``ready`` in now (in order); hand
    ``let_go`` back unacknowledged (read after a record let go)."""

    ready: list[Item[H]]
    let_go: list[Item[H]] = field(default_factory=list)


@dataclass(slots=True)
class _Held(Generic[H]):
    items: deque[tuple[Item[H], int]] = field(default_factory=deque)  # (item, bytes)


class EventPacer(Generic[H]):
    """``quota``: the events quota; ``delays``: whether a tenant's records over it
    are delayed (else the classifier dead-letters them); ``chat_topic``: where
    records are weighed."""

    def __init__(self, quota: QuotaBook, *, delays: Callable[[str], bool], chat_topic: str,
                 max_held: int, max_bytes: int) -> None:
        if max_held < 1 or max_bytes < 1:
            raise ValueError("max_held and max_bytes must be at least 1")
        self.quota = quota
        self.delays = delays
        self.chat_topic = chat_topic
        self.max_held = max_held
        self.max_bytes = max_bytes
        self._held: OrderedDict[str, _Held[H]] = OrderedDict()  # tenants in turn order
        self._count = 0
        self._bytes = 0
        # what was decided of the records taken in and not yet weighed by the classifier
        self._passed: dict[RecordId, str | None] = {}
        self._max_passed = max_held + PASSED_MAX
        self._letting_go: set[str] | None = None  # tenants released, until resumed

    @property
    def held(self) -> int:
        """Records held, of every tenant."""
        return self._count

    @property
    def held_bytes(self) -> int:
        return self._bytes

    def held_of(self, tenant: str) -> int:
        h = self._held.get(tenant)
        return len(h.items) if h is not None else 0

    def admit(self, items: Sequence[Item[H]], now: float) -> Admitted[H]:
        """The records of ``items`` to take in now; the rest are held (see the module
        docstring)."""
        out: Admitted[H] = Admitted([])
        for item in items:
            rec = item[0]
            tenant = tenant_of(rec.value) if rec.topic == self.chat_topic else None
            size = len(rec.value or b"")
            if tenant is None or not self.delays(tenant):
                out.ready.append(item)
            elif self._letting_go is not None and tenant in self._letting_go:
                out.let_go.append(item)
            elif tenant not in self._held and self.quota.take(tenant, now, count=False).allowed:
                self.quota.count(tenant, ALLOWED)
                self._weighed(rec, None)
                out.ready.append(item)
            else:
                self._hold(tenant, item, size, out)
        return out

    def _weighed(self, rec: SourceRecord, refused: str | None) -> None:
        """Remember what was decided of ``rec``, taken in now, for :meth:`weigh`."""
        self._passed[record_id(rec)] = refused
        while len(self._passed) > self._max_passed:  # never classified: let go, not read again
            del self._passed[next(iter(self._passed))]

    def _hold(self, tenant: str, item: Item[H], size: int, out: Admitted[H]) -> None:
        if self.held_of(tenant) >= self.max_held or self._bytes + size > self.max_bytes:
            self._refuse(tenant, item)
            out.ready.append(item)
            return
        self._held.setdefault(tenant, _Held()).items.append((item, size))
        self._count += 1
        self._bytes += size
        self.quota.count(tenant, DELAYED)

    def _refuse(self, tenant: str, item: Item[H]) -> None:
        why = (f"over the events quota of tenant {tenant!r}, and {self.held_of(tenant)} of its "
               f"events ({self._bytes} bytes of every tenant's) are held already: at most "
               f"{self.max_held} events of a tenant, {self.max_bytes} bytes in all "
               f"(MEMSTREAM_QUOTAS__EVENTS_HELD_MAX, MEMSTREAM_QUOTAS__EVENTS_HELD_BYTES)")
        self._weighed(item[0], why)
        self.quota.count(tenant, DEAD_LETTERED)

    def due(self, now: float) -> list[Item[H]]:
        """Held records whose tenant's quota has room at ``now``, each tenant's in
        order, tenants in turn (one record each a round)."""
        out: list[Item[H]] = []
        while self._held:
            progressed = False
            for tenant in list(self._held):
                held = self._held[tenant]
                if not self.quota.take(tenant, now, count=False).allowed:
                    continue
                self.quota.count(tenant, ALLOWED)
                item, size = held.items.popleft()
                self._weighed(item[0], None)
                self._count -= 1
                self._bytes -= size
                out.append(item)
                progressed = True
                if not held.items:
                    del self._held[tenant]
            if not progressed:
                break
        return out

    def next_in(self, now: float) -> float | None:
        """Seconds until a held record is due (0: now); None when nothing is held."""
        waits = [self.quota.peek(t, now).retry_after_s for t in self._held]
        return min(waits) if waits else None

    def weigh(self, rec: SourceRecord, tenant: str, now: float) -> str | None:
        """The classifier's question for a chat event it takes in: None to store it,
        else why it is over quota (dead-lettered ``over_quota``). A record this
        pacer took in was weighed here already (refused only past the bounds); any
        other is weighed now, and dead-lettered over the quota."""
        key = record_id(rec)
        if key in self._passed:
            return self._passed.pop(key)
        decision = self.quota.take(tenant, now, count=False)
        self.quota.count(tenant, ALLOWED if decision.allowed else DEAD_LETTERED)
        return None if decision.allowed else decision.message

    def release(self) -> list[Item[H]]:
        """Every held record, in the order read; until :meth:`resume`, a later record
        of their tenants is let go too."""
        out = [item for held in self._held.values() for item, _ in held.items]
        self._letting_go = (self._letting_go or set()) | set(self._held)
        self._held.clear()  # what was taken in already is weighed as decided
        self._count = self._bytes = 0
        return out

    def resume(self) -> None:
        """Hold and take in records as before (after :meth:`release`)."""
        self._letting_go = None
