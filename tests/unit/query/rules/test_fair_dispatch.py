"""Fair dispatch of queued query requests across tenants: table-driven."""

from __future__ import annotations

import pytest

from streams.query.rules.fair_dispatch import (
    UNKEYED,
    pick,
    queue_share,
    slot_share,
    tenant_of,
)


@pytest.mark.parametrize(("key", "tenant"), [
    (b"acme/u1", "acme"),
    (b"acme/u1/x", "acme"),
    (b"acme/", "acme"),
    (b"/u1", UNKEYED),
    (b"acme", UNKEYED),
    (b"", UNKEYED),
    (None, UNKEYED),
    (b"\xff\xfe/u1", UNKEYED),
])
def test_tenant_of(key: bytes | None, tenant: str) -> None:
    assert tenant_of(key) == tenant


@pytest.mark.parametrize(("slots", "share"), [(1, 1), (2, 1), (3, 1), (16, 8), (17, 8)])
def test_slot_share(slots: int, share: int) -> None:
    assert slot_share(slots) == share


@pytest.mark.parametrize(("read_ahead", "tenants", "share"), [
    (64, 1, 32),  # alone: half, the other half for a tenant not seen yet
    (64, 2, 21),
    (64, 3, 16),
    (64, 100, 1),  # at least one
    (0, 1, 1),
    (1, 1, 1),
])
def test_queue_share(read_ahead: int, tenants: int, share: int) -> None:
    assert queue_share(read_ahead, tenants) == share


@pytest.mark.parametrize(("read_ahead", "tenants"), [(-1, 1), (4, 0)])
def test_queue_share_refuses_nonsense(read_ahead: int, tenants: int) -> None:
    with pytest.raises(ValueError):
        queue_share(read_ahead, tenants)


def test_slot_share_needs_a_slot() -> None:
    with pytest.raises(ValueError):
        slot_share(0)


@pytest.mark.parametrize(("waiting", "running", "slots", "picked"), [
    # the first tenant in turn under its share
    (["loud", "calm"], {}, 4, 0),
    (["calm", "loud"], {}, 4, 0),
    # loud holds its share: calm, behind it in turn, goes first
    (["loud", "calm"], {"loud": 2}, 4, 1),
    # loud alone borrows free slots ...
    (["loud"], {"loud": 2}, 4, 0),
    (["loud"], {"loud": 14}, 16, 0),
    # ... but never the last one: it stays free for another tenant
    (["loud"], {"loud": 3}, 4, None),
    (["loud"], {"loud": 15}, 16, None),
    # which then starts at once
    (["loud", "calm"], {"loud": 15}, 16, 1),
    # no slot free
    (["loud", "calm"], {"loud": 16}, 16, None),
    (["calm"], {"loud": 3, "calm": 1}, 4, None),
    # every waiting tenant at its share: the first in turn borrows
    (["a", "b"], {"a": 2, "b": 2, "c": 1}, 8, 0),
    (["a", "b"], {"a": 4, "b": 4}, 9, None),  # one slot free: kept
    # one slot: whoever is first in turn, when it holds none
    (["x"], {}, 1, 0),
    (["x", "y"], {"x": 1}, 1, None),
    ([], {}, 4, None),
])
def test_pick(waiting: list[str], running: dict[str, int], slots: int,
              picked: int | None) -> None:
    assert pick(waiting, running, slots, slot_share(slots)) == picked


@pytest.mark.parametrize(("waiting", "running", "slots", "share", "picked"), [
    # contended: one slot each, nothing borrowed, however many are free
    (["loud"], {"loud": 1}, 16, 1, None),
    (["loud", "calm"], {"loud": 1}, 16, 1, 1),
    (["loud", "calm"], {}, 16, 1, 0),
    (["loud", "calm"], {"loud": 1, "calm": 1}, 16, 1, None),
    (["calm", "loud"], {"loud": 2}, 16, 2, 0),
    (["loud"], {"loud": 1}, 16, 2, 0),
    # still no slot when none is free
    (["calm"], {"loud": 1}, 1, 1, None),
])
def test_pick_without_borrowing(waiting: list[str], running: dict[str, int], slots: int,
                                share: int, picked: int | None) -> None:
    assert pick(waiting, running, slots, share, borrow=False) == picked
