"""The per-text budget of candidates validated: the work stops growing with the
text, and a candidate past the budget is found, never let through."""

from __future__ import annotations

import pytest

from streams.consolidation.rules.sensitive.budget import BUDGET, checked_each, checked_prefix
from streams.consolidation.rules.sensitive.kinds import Finding, Kind


def spans_of(text: str, word: str) -> list[tuple[int, int]]:
    out, at = [], text.find(word)
    while at >= 0:
        out.append((at, at + len(word)))
        at = text.find(word, at + 1)
    return out


@pytest.mark.parametrize("repeats", [10, 1_000, 10_000])
def test_checked_each_checks_at_most_a_budget_of_characters(repeats: int) -> None:
    text = "no 12345678 " * repeats
    checked: list[int] = []

    def check(start: int, end: int) -> Finding | None:
        checked.append(end - start)
        return None  # every candidate fails its check

    found = checked_each(spans_of(text, "12345678"), check, Kind.CARD, budget=800)
    assert sum(checked) <= 800
    assert len(checked) == min(repeats, 100)
    # past the budget every candidate is taken as found (fail closed)
    assert len(found) == repeats - len(checked)
    assert all(f.kind is Kind.CARD and text[f.start:f.end] == "12345678" for f in found)


def test_checked_each_within_the_budget_is_the_check_itself() -> None:
    text = "a 1111 b 2222"
    found = checked_each(spans_of(text, "1111") + spans_of(text, "2222"),
                         lambda s, e: Finding(s, e, Kind.PHONE) if text[s] == "2" else None,
                         Kind.PHONE)
    assert [text[f.start:f.end] for f in found] == ["2222"]


@pytest.mark.parametrize("repeats", [10, 2_000, 20_000])
def test_checked_prefix_runs_on_a_bounded_prefix(repeats: int) -> None:
    text = "1.2.3.4 " * repeats + "then 9.9.9.9"
    runs: list[int] = []

    def run(prefix: str) -> list[Finding]:
        runs.append(len(prefix))
        return [Finding(s, e, Kind.IP)
                for s, e in spans_of(prefix, "1.2.3.4") + spans_of(prefix, "9.9.9.9")]

    candidates = spans_of(text, "1.2.3.4") + spans_of(text, "9.9.9.9")
    found = checked_prefix(text, candidates, run, Kind.IP, budget=700)
    assert len(runs) == 1
    assert runs[0] == len(text) if repeats == 10 else runs[0] <= 800
    # whatever was not run over is still found: the last address too
    assert any(text[f.start:f.end] == "9.9.9.9" for f in found)
    assert len(found) == repeats + 1


def test_checked_prefix_reports_a_candidate_cut_by_the_prefix() -> None:
    text = "x" * 10 + "4111 1111 1111 1111"
    overlapping = [(10, 29), (15, 24), (20, 29)]
    found = checked_prefix(text, overlapping, lambda prefix: [], Kind.CARD, budget=20)
    assert Finding(10, 29, Kind.CARD) in found  # started before the cut, ended past it


def test_the_budget_is_far_above_a_memory() -> None:
    assert BUDGET >= 4096  # the longest LoCoMo or BEAM turn: under 500 per recognizer
