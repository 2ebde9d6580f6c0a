"""Which tenant's request takes the query consumer's next free slot, and how many of
a tenant's requests may wait for one.

The query consumer reads ahead of its free slots and queues the requests it read
per tenant (:func:`tenant_of`, from the record key ``tenant/user``). A free slot
goes to the tenants' queues in turn (:func:`pick`); a tenant holds at most
``share`` of the slots (:func:`slot_share`, half of them) while another tenant
waits. When no other tenant waits it borrows a free slot — but never the last
one: one slot stays free for a request of another tenant, which then starts at
once. So one busy tenant uses all slots but one, and another tenant's request
never waits behind the busy tenant's backlog.

While the process answering is *contended* — its event loop busy, and more than one
tenant asking lately (the consumer's queues tell) — a tenant holds at most
``contended_slots`` (one by default) and borrows none. On a busy event loop more
requests in flight answer a tenant no sooner (they take turns on the same CPU);
they only put that many more steps ahead of every other tenant's on the loop, so
another tenant's query would wait behind all of them at each of its awaits. With
one each, the tenants share the CPU evenly. While the process is not busy
(requests waiting on a remote provider, say), slots are shared as above and many
requests in flight overlap their waits.

A tenant's queue holds at most :func:`queue_share` requests: the read-ahead split
between the tenants with requests queued and one more (a tenant not seen yet),
so one tenant never fills the read-ahead and a request of another is always read.
A request beyond it is refused at once (the consumer sheds it: ``over_quota``) while
another tenant was seen lately (:mod:`streams.adapters.kafka.tenant_queues`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

UNKEYED = ""
"""The queue of requests whose key names no tenant (no key, not ``tenant/…`` text)."""


def tenant_of(key: bytes | None) -> str:
    """The tenant a request's record key names (``tenant/user``), or :data:`UNKEYED`."""
    if not key:
        return UNKEYED
    try:
        text = key.decode()
    except UnicodeDecodeError:
        return UNKEYED
    tenant, sep, _ = text.partition("/")
    return tenant if sep else UNKEYED


def slot_share(slots: int) -> int:
    """The most slots one tenant holds while another tenant waits: half (at least one)."""
    if slots < 1:
        raise ValueError("at least one slot")
    return max(1, slots // 2)


def queue_share(read_ahead: int, tenants: int) -> int:
    """The most requests one tenant may have queued when ``tenants`` tenants (this one
    included) have requests queued: ``read_ahead`` split between them and one more
    (at least one)."""
    if read_ahead < 0 or tenants < 1:
        raise ValueError("a read-ahead is not negative and a tenant is queued")
    return max(1, read_ahead // (tenants + 1))


def pick(waiting: Sequence[str], running: Mapping[str, int], slots: int,
         share: int, *, borrow: bool = True) -> int | None:
    """The index in ``waiting`` (the tenants with queued requests, in turn order) of the
    tenant whose next request takes a slot; None when no slot is free, or every waiting
    tenant holds its ``share`` of the slots already (``running``: slots held by tenant)
    and only one slot is free (kept for another tenant), or ``borrow`` is False."""
    free = slots - sum(running.values())
    if free <= 0:
        return None
    borrower: int | None = None
    for i, tenant in enumerate(waiting):
        if running.get(tenant, 0) < share:
            return i
        if borrower is None:
            borrower = i
    return borrower if borrow and free > 1 else None
