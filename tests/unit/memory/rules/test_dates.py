"""Dates a query names, and the lift of the memories said then."""

from __future__ import annotations

from datetime import datetime

import pytest

from streams.memory.model import StoredMemory
from streams.memory.rules.dates import Period, lift_dated, named_periods


@pytest.mark.parametrize(("text", "periods"), [
    ("What painting did Melanie show on October 13, 2023?", [Period(2023, 10, 13)]),
    ("What did Gina find on 1 February, 2023?", [Period(2023, 2, 1)]),
    ("Who did Maria have dinner with on May 3, 2023?", [Period(2023, 5, 3)]),
    ("the 4th of July", [Period(None, 7, 4)]),
    ("Where did Joanna travel to in July 2022?", [Period(2022, 7)]),
    ("What did Maria start doing in December, 2023?", [Period(2023, 12)]),
    ("When did Melanie go camping in June?", [Period(None, 6)]),
    ("What did John do in late March?", [Period(None, 3)]),
    ("How many times has Melanie gone to the beach in 2023?", [Period(2023)]),
    ("between August 11 and August 15 2023", [Period(None, 8, 11), Period(2023, 8, 15)]),
    ("in 2023 and again in 2023", [Period(2023)]),
    ("the forest picture shared on December 1,2023", [Period(2023, 12, 1)]),
    ("What state did Joanna visit in summer 2021?", [Period(2021)]),
    # no date: a lowercase month word, a month alone without a preposition, other numbers
    ("What may Caroline do next?", []),
    ("May I ask what you know?", []),
    ("March on, said April.", []),
    ("I ran 2000 metres in 45 minutes", []),
    ("on the 45th of May", [Period(None, 5)]),
    ("When did she go?", []),
])
def test_named_periods(text: str, periods: list[Period]) -> None:
    assert named_periods(text) == periods


@pytest.mark.parametrize(("period", "when", "slack", "holds"), [
    (Period(2023, 10, 13), datetime(2023, 10, 13, 18, 0), 0, True),
    (Period(2023, 10, 13), datetime(2023, 10, 14), 0, False),
    (Period(2023, 10, 13), datetime(2023, 10, 14), 7, True),
    (Period(2023, 10, 13), datetime(2023, 10, 12), 7, False),  # slack is after, not before
    (Period(2022, 7), datetime(2022, 7, 31), 0, True),
    (Period(2022, 7), datetime(2022, 8, 5), 0, False),
    (Period(2022, 7), datetime(2022, 8, 5), 7, True),
    (Period(2022, 7), datetime(2023, 7, 5), 7, False),
    (Period(None, 6), datetime(2021, 6, 2), 0, True),  # June of any year
    (Period(None, 12), datetime(2024, 1, 3), 7, True),  # across the new year
    (Period(None, 12), datetime(2024, 1, 9), 7, False),
    (Period(2023), datetime(2023, 12, 31), 0, True),
    (Period(2023), datetime(2024, 1, 1), 0, False),
    (Period(2024, 2, 30), datetime(2024, 2, 29), 0, True),  # a day past the month's end
])
def test_a_period_holds_its_days_and_the_slack_after(period: Period, when: datetime,
                                                     slack: int, holds: bool) -> None:
    assert period.holds(when, slack) is holds


def mem(mid: str, score: float, when: datetime | None) -> StoredMemory:
    return StoredMemory(id=mid, content=mid, cube="user_profile", score=score, event_time=when)


def test_the_lift_closes_a_share_of_the_distance_to_one_for_memories_of_the_period() -> None:
    found = [mem("june", 0.5, datetime(2023, 6, 20)), mem("may", 0.8, datetime(2023, 5, 2)),
             mem("undated", 0.7, None), mem("july", 0.4, datetime(2023, 7, 3))]
    lifted = lift_dated(found, [Period(2023, 6)], weight=0.5, slack_days=7)
    assert [(m.id, m.score) for m in lifted] == [
        ("may", 0.8), ("june", 0.75), ("undated", 0.7), ("july", 0.7)]  # best first
    assert max(m.score for m in lift_dated(found, [Period(2023)], weight=1.0)) == 1.0


def test_no_period_or_no_weight_changes_nothing() -> None:
    found = [mem("a", 0.4, datetime(2023, 6, 20)), mem("b", 0.9, datetime(2023, 6, 21))]
    assert lift_dated(found, [], weight=0.3) == found
    assert lift_dated(found, [Period(2023, 6)], weight=0.0) == found


def test_at_full_weight_the_periods_memories_come_first_in_their_order() -> None:
    found = [mem("best", 0.9, datetime(2023, 5, 1)), mem("june-a", 0.6, datetime(2023, 6, 3)),
             mem("june-b", 0.5, datetime(2023, 6, 9))]
    lifted = lift_dated(found, [Period(2023, 6)], weight=1.0)
    assert [(m.id, m.score) for m in lifted] == [("june-a", 1.0), ("june-b", 1.0), ("best", 0.9)]
