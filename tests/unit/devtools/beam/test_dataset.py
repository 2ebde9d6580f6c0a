"""Reading BEAM chats: batches into dated sessions, turns cleaned, questions and their ids."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from streams.devtools.beam.dataset import (
    UNDATED_START,
    clean_content,
    parse_anchor,
    parse_chat,
    parse_question,
)


def turn(i: int, text: str = "hi", role: str = "user", **extra: Any) -> dict[str, Any]:
    return {"role": role, "id": i, "content": text, **extra}


@pytest.mark.parametrize(("text", "clean"), [
    ("I use Flask. ->-> 1,2", "I use Flask."),
    ("Help me with this ->->  3 , 14", "Help me with this"),
    ("an example of MessagePack ->-> 2,N/A", "an example of MessagePack"),
    ("evaluate my approach ->-> 5,14)", "evaluate my approach"),
    ("Would you like more? ->-> 3,8\n", "Would you like more?"),
    ("x -> y and a -> b", "x -> y and a -> b"),
    ("->-> 1,2 is how the plan marks it, mid-text", "->-> 1,2 is how the plan marks it, mid-text"),
    ("no index", "no index"),
])
def test_the_plan_index_is_cut_off_the_end(text: str, clean: str) -> None:
    assert clean_content(text) == clean


@pytest.mark.parametrize(("text", "when"), [
    ("March-15-2024", datetime(2024, 3, 15)),
    ("Mar-15-2024", datetime(2024, 3, 15)),
    ("2024-03-15", datetime(2024, 3, 15)),
    ("March 15, 2024", datetime(2024, 3, 15)),
    ("soon", None),
    (None, None),
])
def test_anchors(text: object, when: datetime | None) -> None:
    assert parse_anchor(text) == when


@pytest.mark.parametrize(("qtype", "ids", "evidence", "original", "updated"), [
    ("information_extraction", [28, 29], (28, 29), (), ()),
    ("information_extraction", ["28", 28, " 29 "], (28, 29), (), ()),
    ("temporal_reasoning", {"first_event": [28], "second_event": [86]}, (28, 86), (), ()),
    ("event_ordering", [116, 118, [136, 138]], (116, 118, 136, 138), (), ()),
    ("knowledge_update", {"original_info": [86], "updated_info": [114]}, (86, 114), (86,), (114,)),
    ("knowledge_update", {"original_info": [84, 86], "updated_info": [130]}, (84, 86, 130),
     (84, 86), (130,)),
    # chats 8 and 9 name one turn as both original and update
    ("knowledge_update", {"original_info": [214], "updated_info": [214]}, (214,), (214,), (214,)),
    ("knowledge_update", [86, 114], (86, 114), (), ()),  # no dict: no original nor update
    ("preference_following", [], (), (), ()),
    ("abstention", None, (), (), ()),
    ("summarization", [True, "x", 3.5, 7], (7,), (), ()),  # nothing else counts as an id
])
def test_question_ids(qtype: str, ids: object, evidence: tuple[int, ...],
                      original: tuple[int, ...], updated: tuple[int, ...]) -> None:
    raw = {"question": "q?"} if ids is None else {"question": "q?", "source_chat_ids": ids}
    q = parse_question("7", qtype, raw)
    assert (q.chat_id, q.type, q.question) == ("7", qtype, "q?")
    assert (q.evidence, q.original, q.updated) == (evidence, original, updated)


def test_sessions_are_spread_between_the_batch_anchors() -> None:
    chat = [
        {"batch_number": 1, "time_anchor": None, "turns": [
            [turn(0, "Plan my sprint ->-> 1,1", time_anchor="March-01-2024"),
             turn(1, "Sure ->-> 1,1", role="assistant")],
            [turn(2), turn(3, role="assistant")],
        ]},
        # the anchor on the batch itself
        {"batch_number": 2, "time_anchor": "March-11-2024", "turns": [[turn(4)]]},
        # the anchor only on a later turn of the batch
        {"batch_number": 3, "time_anchor": None, "turns": [
            [turn(5), turn(6, role="assistant")],
            [turn(7, time_anchor="April-10-2024")],
        ]},
    ]
    questions = {"information_extraction": [{"question": "q", "source_chat_ids": [0]}]}
    c = parse_chat("1", chat, questions)
    assert [s.number for s in c.sessions] == [1, 2, 3, 4, 5]
    assert [s.start for s in c.sessions] == [
        datetime(2024, 3, 1), datetime(2024, 3, 6),  # 10 days to the next anchor, two sessions
        datetime(2024, 3, 11),  # 30 days to the next, one session
        datetime(2024, 4, 10), datetime(2024, 4, 20),  # the last: the mean gap, 20 days
    ]
    assert [(t.id, t.role, t.content) for t in c.sessions[0].turns] == [
        (0, "user", "Plan my sprint"), (1, "assistant", "Sure")]
    assert c.turn_count == 8 and [t.id for _, t in c.turns()] == list(range(8))
    assert [q.evidence for q in c.questions] == [(0,)]


def test_a_chat_without_anchors_has_a_session_a_day() -> None:
    chat = [{"batch_number": 1, "turns": [[turn(0)], [turn(1)]]},
            {"batch_number": 2, "turns": [[turn(2)]]}]
    c = parse_chat("2", chat, {})
    assert [s.start for s in c.sessions] == [
        UNDATED_START, datetime(2024, 1, 2), datetime(2024, 1, 3)]
    assert c.questions == []


def test_odd_entries_are_skipped_and_a_session_may_be_empty() -> None:
    chat = [{"batch_number": 1, "turns": [
        [turn(0), "not a turn", {"role": "user", "content": "no id"}, turn(1, role="tool")],
        [],
        "not a session",
    ]}, "not a batch"]
    c = parse_chat("3", chat, {"abstention": "not a list",
                               "information_extraction": ["not a question"]})
    assert [[(t.id, t.role) for t in s.turns] for s in c.sessions] == [[(0, "user"), (1, "user")],
                                                                       []]
    assert c.questions == []
    with pytest.raises(ValueError, match="JSON list"):
        parse_chat("4", {"turns": []}, {})
