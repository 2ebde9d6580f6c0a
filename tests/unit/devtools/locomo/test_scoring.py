"""The LoCoMo harness's pure parts: parsing the file layout and scoring by evidence."""

from __future__ import annotations

from datetime import datetime

import pytest

from streams.devtools.locomo.dataset import Question, parse_date, parse_evidence, parse_samples
from streams.devtools.locomo.scoring import percentile, render_table, score, summarize

SAMPLE = {
    "sample_id": "conv-1",
    "conversation": {
        "speaker_a": "Ana", "speaker_b": "Ben",
        "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "Back from Porto."}],
        "session_2_date_time": "1:14 pm on 25 May, 2023",
        "session_1": [{"speaker": "Ana", "dia_id": "D1:1", "text": "I paint on Sundays."},
                      {"speaker": "Ben", "dia_id": "D1:2", "text": "Nice!"},
                      "not a turn"],
        "session_1_date_time": "8:56 pm on 20 July, 2023",
    },
    "qa": [
        {"question": "What does Ana do on Sundays?", "answer": "paint", "category": 4,
         "evidence": ["D1:1"]},
        {"question": "Where was Ben?", "category": 1, "evidence": ["D2:1; D1:2"]},
        {"question": "Adversarial", "category": 5, "evidence": ["D1:1"]},
        {"question": "No evidence", "category": 3, "evidence": []},
    ],
}


@pytest.mark.parametrize(("raw", "ids"), [
    (["D1:3"], ["D1:3"]),
    (["D8:6; D9:17"], ["D8:6", "D9:17"]),
    (["D:11:26"], ["D11:26"]),
    (["D01:03", "D1:3"], ["D1:3"]),
    ("D2:4", ["D2:4"]),
    ([], []),
    (["no id here"], []),
])
def test_evidence_ids_also_from_malformed_entries(raw: object, ids: list[str]) -> None:
    assert parse_evidence(raw) == ids


@pytest.mark.parametrize(("text", "when"), [
    ("1:14 pm on 25 May, 2023", datetime(2023, 5, 25, 13, 14)),
    ("8:56 pm on 20 Jul, 2023", datetime(2023, 7, 20, 20, 56)),
    ("2023-05-08", datetime(2023, 5, 8)),
    ("yesterday", None),
])
def test_session_dates(text: str, when: datetime | None) -> None:
    assert parse_date(text) == when


def test_samples_sessions_in_number_order_and_questions_of_categories_1_to_4() -> None:
    (s,) = parse_samples([SAMPLE])
    assert [x.key for x in s.sessions] == ["session_1", "session_2"]
    assert [t.dia_id for t in s.sessions[0].turns] == ["D1:1", "D1:2"]
    assert s.turn_count == 3
    assert [(q.category, q.evidence) for q in s.questions] == [
        (4, ("D1:1",)), (1, ("D2:1", "D1:2")), (3, ())]
    with pytest.raises(ValueError, match="JSON list"):
        parse_samples({"sample_id": "x"})


def test_recall_at_k_and_within_the_budget() -> None:
    q = Question("conv-1", "q", 1, ("D1:1", "D2:1"))
    listed = [["conv-1:D9:9"]] * 5 + [["conv-1:D1:1"]] + [["x"]] * 10 + [["conv-1:D2:1"]]
    got = score(q, listed, budget_sources=["conv-1:D2:1", "other:D1:1"], latency_ms=3.0)
    assert got.recall == {5: 0.0, 10: 0.5, 20: 1.0}
    assert got.b4k == 0.5 and got.has_evidence


def test_questions_without_evidence_are_timed_but_not_scored() -> None:
    found = score(Question("c", "q", 4, ("D1:1",)), [["c:D1:1"]], ["c:D1:1"], 10.0)
    missed = score(Question("c", "q", 4, ("D1:2",)), [], [], 20.0)
    blank = score(Question("c", "q", 3, ()), [], [], 30.0)
    s = summarize([found, missed, blank])
    assert (s.questions, s.unscored, s.b4k, s.recall[5]) == (2, 1, 0.5, 0.5)
    assert list(s.by_category) == ["single-hop"]
    assert s.p50_ms == 20.0
    doc = s.as_json()
    assert doc["questions"] == 2 and doc["unscored"] == 1 and doc["b4k"] == 0.5
    assert "1 question(s) without a usable evidence id" in render_table(s)


def test_percentiles_interpolate() -> None:
    assert percentile([], 50) == 0.0
    assert percentile([10.0, 20.0, 30.0, 40.0], 50) == 25.0
    assert percentile([5.0], 99) == 5.0
