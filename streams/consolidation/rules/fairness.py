"""Which consolidation run takes the next free slot: a share per tenant.

A worker consolidates at most ``slots`` runs at once, and one tenant's runs
hold at most ``share`` of them (:func:`tenant_share`; a tenant's own share, the
``sessions_consolidating`` quota of ``quotas.tenant_overrides``, before it), so one
tenant's backlog
never takes every slot: another tenant's run finds one free, or the next one
freed, whatever the first tenant has queued.

Runs waiting for a slot are picked by :func:`pick`: a run that gave its slot
up while it waited for a cube's lock and now holds the lock (``resuming``)
before any other, then the others in arrival order; a run whose tenant holds
its share already is passed over while another tenant's run waits. When none
does, it borrows a free slot — but never the last one: one slot stays free for
a run of another tenant, which then starts at once. So a worker with one busy
tenant uses all slots but one, and a second tenant's run never waits for the
first tenant's runs to end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


def tenant_share(slots: int, configured: int = 0) -> int:
    """The most slots one tenant's runs hold at once: ``configured`` (at most
    ``slots``), or when 0, half the slots (at least one)."""
    if slots < 1:
        raise ValueError("at least one slot")
    if configured < 0:
        raise ValueError("a share is not negative")
    return min(slots, configured) if configured else max(1, slots // 2)


@dataclass(frozen=True)
class Waiting:
    """A run waiting for a slot: its tenant, and whether it holds a cube's lock."""

    tenant: str
    resuming: bool = False


def over_share(tenant: str, running: Mapping[str, int], share: int,
               shares: Mapping[str, int] | None = None) -> bool:
    """Whether ``tenant``'s runs hold its share (``shares``: tenants' own, before
    ``share``) already."""
    return running.get(tenant, 0) >= (shares or {}).get(tenant, share)


def may_start(tenant: str, running: Mapping[str, int], slots: int, share: int,
              shares: Mapping[str, int] | None = None) -> bool:
    """Whether a run of ``tenant`` may take a slot now (``running``: slots held by
    tenant)."""
    return sum(running.values()) < slots and not over_share(tenant, running, share, shares)


def pick(waiting: Sequence[Waiting], running: Mapping[str, int], slots: int,
         share: int, shares: Mapping[str, int] | None = None) -> int | None:
    """The index in ``waiting`` (in arrival order) of the run that takes the next
    slot, or None when no slot is free, or every waiting tenant holds its share and
    only one slot is free (kept for another tenant). ``shares``: the tenants whose
    share is their own (``quotas.tenant_overrides``), each at most ``slots``."""
    free = slots - sum(running.values())
    if free <= 0:
        return None
    first: int | None = None
    borrower: int | None = None
    for i, w in enumerate(waiting):
        if not may_start(w.tenant, running, slots, share, shares):
            if borrower is None:
                borrower = i
            continue
        if w.resuming:
            return i
        if first is None:
            first = i
    if first is not None:
        return first
    return borrower if free > 1 else None
