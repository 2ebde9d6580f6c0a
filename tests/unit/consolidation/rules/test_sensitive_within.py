"""A fact said word for word inside an episode takes the episode's findings within it:
found only at word boundaries, findings cut at its edges and shifted; and on the
project's corpus, what the detector finds in such a fact by itself is always among
them (checked with the real scanner in tests/unit/adapters)."""

from __future__ import annotations

import pytest

from streams.consolidation.rules.sensitive.kinds import Finding, Kind
from streams.consolidation.rules.sensitive.within import findings_within, said_within

EPISODES = ["User: I live in Berlin. My card is 4111 1111 1111 1111.", "User: Berliner Weisse"]


@pytest.mark.parametrize(("fact", "where"), [
    ("I live in Berlin.", (0, 6)),
    ("My card is 4111 1111 1111 1111.", (0, 24)),
    ("Berlin", (0, 16)),  # the first at word boundaries ("Berliner" is not)
    ("live in Berl", None),  # inside a word
    ("I moved to Paris.", None),
    ("", None),
    ("   ", None),
])
def test_where_a_fact_was_said(fact: str, where: tuple[int, int] | None) -> None:
    assert said_within(fact, EPISODES) == where


def test_findings_within_are_cut_at_the_edges_and_shifted() -> None:
    found = [Finding(35, 54, Kind.CARD), Finding(0, 4, Kind.NAME), Finding(20, 40, Kind.EMAIL)]
    assert findings_within(found, 24, 31) == [Finding(11, 30, Kind.CARD),
                                              Finding(0, 16, Kind.EMAIL)]
    assert findings_within(found, 6, 10) == []
