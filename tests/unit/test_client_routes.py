"""Where a hedged query's second copy goes (``streams.client_routes``)."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment

from streams.client_routes import Owners, hedge_partition, owners_from

TWO = {0: "a", 1: "b", 2: "a", 3: "b"}


@pytest.mark.parametrize(("first", "owners", "count", "expected"), [
    pytest.param(0, TWO, 4, [1, 3], id="the-other-member-s-partitions"),
    pytest.param(1, TWO, 4, [0, 2], id="either-way"),
    pytest.param(0, {0: "a", 1: "a", 2: "a", 3: "a"}, 4, None, id="one-member-holds-all"),
    pytest.param(0, {0: "a", 1: "b", 2: "c"}, 3, [1, 2], id="three-members"),
    pytest.param(5, TWO, 6, [0, 1, 2, 3], id="first-copy-on-an-unassigned-partition"),
    pytest.param(2, None, 4, 3, id="unknown-assignment-next-partition"),
    pytest.param(3, {}, 4, 0, id="empty-assignment-wraps"),
    pytest.param(0, None, 1, None, id="one-partition-no-hedge"),
    pytest.param(0, {0: "a", 1: "b", 7: "b"}, 4, [1], id="partitions-beyond-the-topic-ignored"),
])
def test_hedge_partition(first: int, owners: Owners | None, count: int,
                         expected: list[int] | int | None) -> None:
    seen: list[list[int]] = []

    def pick(options: list[int]) -> int:
        seen.append(options)
        return options[0]

    got = hedge_partition(first, owners, count, pick)
    if isinstance(expected, list):
        assert seen == [expected] and got == expected[0]
    else:
        assert got == expected and seen == []


class Response:
    def __init__(self, groups: list[tuple[Any, ...]]) -> None:
        self.groups = groups


def assignment(topic: str, partitions: list[int]) -> bytes:
    raw: bytes = ConsumerProtocolMemberAssignment(0, [(topic, partitions)], b"").encode()
    return raw


def test_owners_are_read_from_a_stable_group_s_assignments() -> None:
    members = [("m1", "c", "h", b"", assignment("q", [0, 2])),
               ("m2", "c", "h", b"", assignment("q", [1, 3])),
               ("m3", "c", "h", b"", b"")]
    stable = Response([(0, "g", "Stable", "consumer", "roundrobin", members)])
    assert owners_from([stable], "q") == {0: "m1", 2: "m1", 1: "m2", 3: "m2"}
    assert owners_from([stable], "other") == {}


def test_a_rebalancing_or_failed_group_gives_no_owners() -> None:
    members = [("m1", "c", "h", b"", assignment("q", [0]))]
    assert owners_from([Response([(0, "g", "PreparingRebalance", "consumer", "rr",
                                   members)])], "q") == {}
    assert owners_from([Response([(16, "g", "Stable", "consumer", "rr", members)])], "q") == {}
