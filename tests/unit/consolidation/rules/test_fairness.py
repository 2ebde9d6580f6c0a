"""Slots per tenant: the share, who may start, who is picked."""

from __future__ import annotations

import pytest

from streams.consolidation.rules.fairness import Waiting, may_start, pick, tenant_share


@pytest.mark.parametrize(("slots", "configured", "expected"), [
    (8, 0, 4),  # half by default
    (9, 0, 4),
    (2, 0, 1),
    (1, 0, 1),  # at least one
    (8, 3, 3),  # as configured
    (8, 8, 8),  # a single-tenant deployment may give one tenant every slot
    (8, 20, 8),  # never more than the slots
])
def test_tenant_share(slots: int, configured: int, expected: int) -> None:
    assert tenant_share(slots, configured) == expected


@pytest.mark.parametrize(("slots", "configured"), [(0, 0), (4, -1)])
def test_tenant_share_rejects_nonsense(slots: int, configured: int) -> None:
    with pytest.raises(ValueError):
        tenant_share(slots, configured)


@pytest.mark.parametrize(("tenant", "running", "slots", "share", "expected"), [
    ("a", {}, 8, 4, True),
    ("a", {"a": 3}, 8, 4, True),
    ("a", {"a": 4}, 8, 4, False),  # at its share
    ("b", {"a": 4}, 8, 4, True),  # another tenant is not held up by it
    ("b", {"a": 4, "c": 4}, 8, 4, False),  # every slot taken
    ("a", {"a": 0}, 1, 1, True),
])
def test_may_start(tenant: str, running: dict[str, int], slots: int, share: int,
                   expected: bool) -> None:
    assert may_start(tenant, running, slots, share) is expected


A, B, C = Waiting("a"), Waiting("b"), Waiting("c")


@pytest.mark.parametrize(("waiting", "running", "slots", "share", "expected"), [
    ([], {}, 8, 4, None),
    ([A, B], {}, 8, 4, 0),  # arrival order
    ([A, A, B], {"a": 4}, 8, 4, 2),  # a's backlog over its share is passed over
    ([A, A], {"a": 4}, 8, 4, 0),  # ... and borrows a free slot when nobody else waits
    ([A, A], {"a": 7}, 8, 4, None),  # ... but never the last one
    ([A], {"a": 6, "b": 1}, 8, 4, None),
    ([A, B], {"a": 7}, 8, 4, 1),  # the slot kept free goes to another tenant
    ([A, B], {"a": 4, "c": 4}, 8, 4, None),  # no slot free
    ([B, Waiting("a", resuming=True)], {"c": 1}, 2, 2, 1),  # a lock holder first
    ([B, Waiting("a", resuming=True)], {"a": 1}, 4, 1, 0),  # ... within its tenant's share
    ([A, B, C], {"a": 1, "b": 1}, 4, 1, 2),
])
def test_pick(waiting: list[Waiting], running: dict[str, int], slots: int, share: int,
              expected: int | None) -> None:
    assert pick(waiting, running, slots, share) == expected
