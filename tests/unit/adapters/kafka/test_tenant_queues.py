"""The query consumer's read-ahead queues: each tenant's cost per request and the
slots a costlier tenant holds while another is active (fake clock, no event loop)."""

from __future__ import annotations

from dataclasses import dataclass

from streams.adapters.kafka.tenant_queues import OTHERS_SEEN_S, TenantQueues


@dataclass
class Rec:
    key: bytes
    value: bytes = b"{}"
    topic: str = "memory.queries"
    partition: int = 0
    offset: int = 0


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def queues(clock: Clock, slots: int = 16) -> TenantQueues:
    return TenantQueues(64, slots, clock=clock)


def test_a_tenant_alone_has_no_cap() -> None:
    q = queues(Clock())
    q.push(Rec(b"loud/u"))
    q.served("loud", 0.5)
    assert q.caps() == {}


def test_a_costlier_tenant_is_capped_while_another_is_active() -> None:
    clock = Clock()
    q = queues(clock)
    for _ in range(3):
        q.push(Rec(b"loud/u"))
    q.push(Rec(b"calm/u"))
    q.served("calm", 0.010)
    q.served("loud", 0.100)
    assert q.caps() == {"loud": 1}
    # loud holds its one slot: the next start is calm's, not loud's second
    picked = q.next({"loud": 1})
    assert picked is not None and picked[0] == "calm"
    assert q.next({"loud": 1, "calm": 1}) is None  # loud waits, though 14 slots are free


def test_the_cap_follows_the_measured_costs() -> None:
    clock = Clock()
    q = queues(clock)
    q.push(Rec(b"loud/u"))
    q.push(Rec(b"calm/u"))
    q.served("calm", 0.010)
    q.served("loud", 0.020)
    assert q.caps() == {"loud": 4}
    for _ in range(30):  # loud's requests get as cheap as calm's
        q.served("loud", 0.010)
    assert q.caps() == {}


def test_the_cap_ends_when_the_other_tenant_is_no_longer_seen() -> None:
    clock = Clock()
    q = queues(clock)
    q.push(Rec(b"calm/u"))
    q.push(Rec(b"loud/u"))
    q.served("calm", 0.010)
    q.served("loud", 0.100)
    assert q.caps() == {"loud": 1}
    clock.now += OTHERS_SEEN_S + 1
    q.push(Rec(b"loud/u"))  # loud seen again, calm not
    q.served("loud", 0.100)
    assert q.caps() == {}
    first = q.next({"loud": 1})  # calm's queued request, first in turn
    second = q.next({"loud": 1, "calm": 1})  # and loud's second slot: no cap now
    assert first is not None and first[0] == "calm"
    assert second is not None and second[0] == "loud"


def test_a_tenant_not_seen_lately_is_not_measured() -> None:
    q = queues(Clock())
    q.served("ghost", 5.0)
    q.push(Rec(b"calm/u"))
    q.served("calm", 0.01)
    assert q.caps() == {}
