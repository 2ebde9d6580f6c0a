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

Slots share the worker's event loop, not its CPU: a tenant whose requests each take
ten times as long (a cube of 30,000 memories against one of 300) would, with half
the slots, hold the loop ten times as long as the other, whose requests then wait
between its steps. So while another tenant is active, a tenant whose requests take
longer than the cheapest active tenant's holds fewer slots, in proportion
(:func:`cost_share`, at least one), and borrows none beyond them.

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


def cost_share(share: int, cost: float, cheapest: float) -> int:
    """The slots a tenant whose requests take ``cost`` (seconds each, on average) may hold
    while a tenant whose requests take ``cheapest`` is active: ``share`` scaled by
    ``cheapest / cost`` (to the nearest slot) when it costs more, at least one slot."""
    if share < 1 or cost < 0 or cheapest < 0:
        raise ValueError("a share of at least one slot and costs not negative")
    if cost <= cheapest or cost == 0:
        return share
    return max(1, min(share, int(share * cheapest / cost + 0.5)))


def pick(waiting: Sequence[str], running: Mapping[str, int], slots: int,
         share: int, caps: Mapping[str, int] | None = None) -> int | None:
    """The index in ``waiting`` (the tenants with queued requests, in turn order) of the
    tenant whose next request takes a slot; None when no slot is free, or every waiting
    tenant holds its ``share`` of the slots already (``running``: slots held by tenant)
    and only one slot is free (kept for another tenant). A tenant in ``caps`` (costlier
    than another active tenant: :func:`cost_share`) takes no slot beyond its cap."""
    free = slots - sum(running.values())
    if free <= 0:
        return None
    borrower: int | None = None
    for i, tenant in enumerate(waiting):
        held = running.get(tenant, 0)
        if caps is not None and held >= caps.get(tenant, slots):
            continue
        if held < share:
            return i
        if borrower is None:
            borrower = i
    return borrower if free > 1 else None
