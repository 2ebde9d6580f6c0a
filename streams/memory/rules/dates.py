"""Dates a query names, and a lift for the memories dated in them.

"What did Maria donate in December 2023?", "Who did Maria have dinner with on
May 3, 2023?", "When did Melanie go camping in June?": a question that names
a day, a month or a year asks about what was said then. Words cannot find it
(the memory says "yesterday", or "last week"), but every memory carries the
time it was said (``event_time``).

:func:`named_periods` reads the periods a text names, in English: a day
(``October 13, 2023``, ``13 October 2023``, ``1 February, 2023``), a month of
a year (``July 2022``), a month of any year (``in June``), a year (``in
2023``). Month names count only in full and capitalised (``May``, not ``may``);
a month or a year alone only after a preposition or a season (``in May``, not
``May I ask``; ``in 2023``, ``summer 2021``, not ``2000 metres``); years are
four digits from 1900 to 2099. A season names its year, not its months. Relative expressions
("last week") are not read: nothing says when the question was asked.

:func:`lift_dated` raises the score of each memory whose ``event_time`` falls
in a named period, or up to ``slack_days`` after it (what happened is often
told in the next days: "I went to Chicago last week"), by ``weight`` of its
distance to 1 — ``s + weight · (1 − s)`` — so scores stay on 0..1, the order
among the memories of the period and among the others is kept (at weight 1
the period's memories all score 1 and come first, in the order given), and a
query naming no date changes nothing. :data:`DATE_LIFT` and
:data:`DATE_SLACK_DAYS` were chosen by leave-one-conversation-out rotation on
LoCoMo (``make bench-rotation``: 1.0 in four folds of five, 0.7 in the other;
no slack in three).
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta

from streams.memory.model import StoredMemory, by_score

DATE_LIFT = 1.0  # the memories of the named period come first, in their order
DATE_SLACK_DAYS = 0

_MONTHS = {name: i for i, name in enumerate(calendar.month_name) if name}
_MONTH = "(?P<month>" + "|".join(_MONTHS) + ")"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_ALONE = "(?:in|of|during|since|until|by|early|mid|late|spring|summer|autumn|fall|winter)"
_PATTERNS = [
    re.compile(rf"\b{_MONTH}\s+{_DAY}\b(?!\d)(?:(?:,\s*|\s+){_YEAR}\b)?"),  # October 13, 2023
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?(?:\s+{_YEAR}\b)?"),  # 13 October 2023
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b"),  # July 2022
    re.compile(rf"\b{_ALONE}\s+{_MONTH}\b"),  # in June
    re.compile(rf"\b{_ALONE}\s+{_YEAR}\b"),  # in 2023
]


@dataclass(frozen=True)
class Period:
    """A day, a month or a year; a month without a year is that month of any year."""

    year: int | None
    month: int | None = None
    day: int | None = None

    def bounds(self, year: int) -> tuple[date, date]:
        """First and last day of the period in ``year`` (this period's own year if it has one)."""
        y = self.year if self.year is not None else year
        if self.month is None:
            return date(y, 1, 1), date(y, 12, 31)
        last = calendar.monthrange(y, self.month)[1]
        if self.day is None:
            return date(y, self.month, 1), date(y, self.month, last)
        d = date(y, self.month, min(self.day, last))
        return d, d

    def holds(self, when: datetime, slack_days: int = 0) -> bool:
        """Whether ``when`` falls in the period or within ``slack_days`` after it."""
        day = when.date()
        years = [self.year] if self.year is not None else [day.year, day.year - 1]
        for y in years:
            if y is None or not 1 <= y <= 9999:
                continue
            start, end = self.bounds(y)
            if start <= day <= end + timedelta(days=max(slack_days, 0)):
                return True
        return False


MAX_PHRASES = 32  # a question names a few dates; a text of thousands is read no further


def _dates(text: str) -> list[tuple[int, int, Period]]:
    """Each date phrase of ``text`` (at most ``MAX_PHRASES`` per pattern): its span and
    period, the most specific reading first."""
    out: list[tuple[int, int, Period]] = []
    for pattern in _PATTERNS:
        found = 0
        for m in pattern.finditer(text):
            if found >= MAX_PHRASES:
                break
            found += 1
            parts = m.groupdict()
            alone = parts.get("day") is None and (parts.get("month") is None
                                                  or parts.get("year") is None)
            start = m.start("month" if parts.get("month") else "year") if alone else m.start()
            if any(start < b and a < m.end() for a, b, _ in out):
                continue  # part of a longer date already read
            month = _MONTHS[parts["month"]] if parts.get("month") else None
            day = int(parts["day"]) if parts.get("day") else None
            year = int(parts["year"]) if parts.get("year") else None
            if day is not None and not 1 <= day <= 31:
                continue
            out.append((start, m.end(), Period(year, month, day)))
    return out


def named_periods(text: str) -> list[Period]:
    """The periods ``text`` names, no repeats."""
    return list(dict.fromkeys(p for _, _, p in _dates(text)))


def lift_dated(memories: Sequence[StoredMemory], periods: Sequence[Period], *,
               weight: float, slack_days: int = 0) -> list[StoredMemory]:
    """``memories`` with those dated in one of ``periods`` lifted, best first."""
    if not periods or weight <= 0:
        return list(memories)
    out = [
        replace(m, score=m.score + weight * (1.0 - m.score))
        if m.event_time is not None and any(p.holds(m.event_time, slack_days) for p in periods)
        else m
        for m in memories
    ]
    return sorted(out, key=by_score, reverse=True)
