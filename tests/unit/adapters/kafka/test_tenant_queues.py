"""The query consumer's tenant queues: slots shared one each while the process is
busy and another tenant is active, as before otherwise. Clocks passed in."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from streams.adapters.kafka.tenant_queues import OTHERS_SEEN_S, TenantQueues

SLOTS = 16


@dataclass
class Rec:
    key: bytes
    offset: int
    topic: str = "memory.queries"
    partition: int = 0
    value: bytes = b"{}"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def queues(busy: bool, clock: Clock, contended_slots: int = 1) -> TenantQueues:
    return TenantQueues(64, SLOTS, contended_slots=contended_slots,
                        busy=lambda: busy, clock=clock)


def failing() -> bool:
    raise RuntimeError("no running event loop")


def started(q: TenantQueues, running: dict[str, int]) -> list[str]:
    """Start queued requests while one may start: the tenants, in order."""
    out = []
    while (picked := q.next(running)) is not None:
        tenant, _ = picked
        running[tenant] = running.get(tenant, 0) + 1
        out.append(tenant)
    return out


# calm asked ``calm_ago`` seconds before loud's ten requests are read, holding none
@pytest.mark.parametrize(("busy", "calm_ago", "contended_slots", "loud_started"), [
    (True, 0.1, 1, 1),  # busy, calm active: one slot for loud
    (True, 0.1, 3, 3),
    (True, OTHERS_SEEN_S - 0.1, 1, 1),  # a tenant asking every few seconds is active
    (True, 0.1, 12, 8),  # never more than half the slots (16)
    (True, OTHERS_SEEN_S + 0.1, 1, 10),  # calm not active lately: loud alone borrows
    (False, 0.1, 1, 10),  # not busy: loud borrows (calm waits for nothing)
    (True, 0.1, 0, 10),  # off
    (True, None, 1, 10),  # loud alone
])
def test_a_loud_tenant_beside_an_active_one(busy: bool, calm_ago: float | None,
                                            contended_slots: int, loud_started: int) -> None:
    clock = Clock()
    q = queues(busy, clock, contended_slots)
    running: dict[str, int] = {}
    if calm_ago is not None:
        clock.now -= calm_ago
        assert q.push(Rec(b"calm/u", 0))
        assert started(q, running) == ["calm"]
        running.pop("calm")  # answered
        clock.now += calm_ago
    for o in range(10):
        assert q.push(Rec(b"loud/u", o), may_shed=False)
    assert started(q, running) == ["loud"] * loud_started


def test_a_tenant_holding_a_slot_is_active_however_long_ago_it_asked() -> None:
    clock = Clock()
    q = queues(True, clock)
    running = {"calm": 1}  # a slow request of calm's, asked long ago
    for o in range(5):
        assert q.push(Rec(b"loud/u", o), may_shed=False)
    assert started(q, running) == ["loud"]
    running.pop("calm")
    clock.now += OTHERS_SEEN_S + 1  # calm gone: loud borrows again
    assert started(q, running) == ["loud"] * 4


def test_contended_tenants_take_turns_one_slot_each() -> None:
    clock = Clock()
    q = queues(True, clock)
    for o in range(4):
        q.push(Rec(b"loud/u", o), may_shed=False)
        q.push(Rec(b"calm/u", 100 + o), may_shed=False)
    running: dict[str, int] = {}
    assert sorted(started(q, running)) == ["calm", "loud"]
    running["loud"] -= 1  # loud's answered: its next one, not a second of calm's
    assert started(q, running) == ["loud"]


def test_a_busy_that_fails_is_not_busy() -> None:
    clock = Clock()
    q = TenantQueues(64, SLOTS, contended_slots=1, busy=failing, clock=clock)
    q.push(Rec(b"calm/u", 0), may_shed=False)
    for o in range(5):
        q.push(Rec(b"loud/u", o), may_shed=False)
    assert sorted(started(q, {})) == ["calm"] + ["loud"] * 5
