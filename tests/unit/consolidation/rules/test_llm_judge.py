"""The model judge's prompt, and the validation and repair of its answers."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from streams.consolidation.rules.llm_judge import (
    JudgeOutputError,
    build_judge_messages,
    clip_text,
    extract_json,
    importance_of,
    parse_judge_output,
)
from streams.memory.model import SourceMessage

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def msg(
    i: int, content: str, *, role: str = "user", new: bool = True, name: str | None = None
) -> SourceMessage:
    at = T0 + timedelta(minutes=i)
    return SourceMessage(f"e{i}", role, content, at, name=name, new=new)


SESSION = [
    msg(1, "I live in Paris.", new=False),
    msg(2, "Nice!", role="assistant", new=False),
    msg(3, "I moved to Berlin\nlast month.", name="Caroline"),
    msg(4, "Noted.", role="assistant"),
    msg(5, "I love hiking."),
]
NEW = [m for m in SESSION if m.new]


def test_prompt_numbers_new_lines_and_marks_context() -> None:
    system, user = build_judge_messages(SESSION, max_items=7)
    assert system["role"] == "system" and user["role"] == "user"
    lines = user["content"].splitlines()[1:]
    assert len(lines) == len(SESSION)  # the full session, one line per message
    assert lines[0].startswith("c1. ") and "[NEW]" not in lines[0]
    assert lines[1].startswith("c2. ")
    assert lines[2] == "1. [NEW] 2024-05-01 10:03 Caroline (user): I moved to Berlin last month."
    assert lines[3].startswith("2. [NEW]") and lines[4].startswith("3. [NEW]")
    for word in ('"content"', '"type"', '"scope"', '"importance"', '"source"', "at most 7"):
        assert word in system["content"]
    for word in ("user", "agent", "text", "preference", "skill", "tool"):
        assert f'"{word}"' in system["content"]


def item(content: object, **fields: object) -> dict[str, object]:
    return {"content": content, **fields}


GOOD = json.dumps([item("Caroline moved to Berlin.", type="text", scope="user", importance=0.7,
                        source=[1]), item("Loves hiking.", type="preference", source=[3])])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(GOOD, ["Caroline moved to Berlin.", "Loves hiking."], id="plain"),
        pytest.param(f"```json\n{GOOD}\n```", ["Caroline moved to Berlin.", "Loves hiking."],
                     id="fenced-json"),
        pytest.param(f"```\n{GOOD}\n```", ["Caroline moved to Berlin.", "Loves hiking."],
                     id="fenced-bare"),
        pytest.param(f"Here are the memories [2 items]:\n{GOOD}\nHope this helps!",
                     ["Caroline moved to Berlin.", "Loves hiking."], id="prose-around"),
        pytest.param(json.dumps({"memories": json.loads(GOOD)}),
                     ["Caroline moved to Berlin.", "Loves hiking."], id="wrapped-object"),
        pytest.param(json.dumps({"content": "Solo fact."}), ["Solo fact."], id="single-object"),
        pytest.param(GOOD[:-25], ["Caroline moved to Berlin."], id="truncated-last-item"),
        pytest.param('```json\n{"memories": [{"content": "A b."}, {"content": "C d', ["A b."],
                     id="truncated-wrapped-in-open-fence"),
        pytest.param('[{"content": "A b."}, {"content": "C d.", "source": [1], "importance": 0.',
                     ["A b."], id="truncated-after-nested-list-drops-the-item"),
        pytest.param('[{"content": "A, b.",}, {"content": "C d.", "source": [1,],},]',
                     ["A, b.", "C d."], id="trailing-commas"),
        pytest.param('["Fact one.", "Fact two."]', ["Fact one.", "Fact two."], id="bare-strings"),
        pytest.param("[]", [], id="empty-array"),
        pytest.param("```json\n[]\n```", [], id="fenced-empty-array"),
        pytest.param(json.dumps([item(None), item(42), item(["x"]), item("   "), {"type": "text"}]),
                     [], id="bad-contents-dropped"),
        pytest.param(json.dumps([{"memory": "Alias key."}, {"text": "Other alias."}]),
                     ["Alias key.", "Other alias."], id="content-aliases"),
        pytest.param(json.dumps([item("  spaced\n  out  ")]), ["spaced out"],
                     id="whitespace-collapsed"),
    ],
)
def test_parse_repairs(text: str, expected: list[str]) -> None:
    assert [c.content for c in parse_judge_output(text, NEW)] == expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("   \n ", id="blank"),
        pytest.param("I could not find anything to remember.", id="prose-only"),
        pytest.param("[1, 2, 3]", id="array-of-numbers"),
        pytest.param('[{"content": "never closed', id="truncated-before-first-item"),
        pytest.param("{}", id="empty-object"),
        pytest.param('{"note": "no list here"}', id="object-without-items"),
        pytest.param("[{'content': 'python literal'}]", id="single-quotes"),
    ],
)
def test_nothing_parseable_raises(text: str) -> None:
    with pytest.raises(JudgeOutputError):
        parse_judge_output(text, NEW)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.8, 0.8), ("0.8", 0.8), (8, 0.8), ("8", 0.8), (80, 0.8), ("80%", 0.8), (1, 1.0),
        (0, 0.0), (-1, 0.0), (1000, 1.0), ("high", 0.8), ("LOW", 0.2), (True, 0.5),
        (None, 0.5), ("abc", 0.5), ([0.9], 0.5), (float("nan"), 0.5),
    ],
)
def test_importance_is_repaired_into_0_1(value: object, expected: float) -> None:
    assert importance_of(value) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("fields", "type_", "scope"),
    [
        ({"type": "preference", "scope": "agent"}, "preference", "agent"),
        ({"type": "Skill", "scope": "USER"}, "skill", "user"),
        ({"type": "preferences"}, "preference", "user"),
        ({"type": "tool_mem"}, "tool", "user"),
        ({"category": "pref"}, "preference", "user"),
        ({"type": "opinion", "scope": "world"}, "text", "user"),
        ({"type": 3, "scope": None}, "text", "user"),
        ({"scope": "assistant"}, "text", "agent"),
        ({}, "text", "user"),
    ],
)
def test_type_and_scope_defaults(fields: dict[str, object], type_: str, scope: str) -> None:
    [cand] = parse_judge_output(json.dumps([item("Some fact.", **fields)]), NEW)
    assert (cand.type, cand.scope) == (type_, scope)


@pytest.mark.parametrize(
    ("source", "ids", "minute"),
    [
        pytest.param([2], ("e4",), 4, id="one"),
        pytest.param([1, 3], ("e3", "e5"), 5, id="newest-time"),
        pytest.param("1, 2", ("e3", "e4"), 4, id="string"),
        pytest.param(["3", 1, 3], ("e5", "e3"), 5, id="mixed-duplicates"),
        pytest.param([9], ("e3", "e4", "e5"), 5, id="out-of-range-means-all"),
        pytest.param("c2", ("e3", "e4", "e5"), 5, id="context-line-means-all"),
        pytest.param(None, ("e3", "e4", "e5"), 5, id="missing-means-all"),
        pytest.param([True], ("e3", "e4", "e5"), 5, id="bool-ignored"),
    ],
)
def test_source_numbers_map_to_new_messages(
    source: object, ids: tuple[str, ...], minute: int
) -> None:
    [cand] = parse_judge_output(json.dumps([item("A fact.", source=source)]), NEW)
    assert cand.source_event_ids == ids
    assert cand.event_time == T0 + timedelta(minutes=minute)


def test_no_new_messages_gives_no_sources() -> None:
    [cand] = parse_judge_output('[{"content": "x y"}]', [])
    assert cand.source_event_ids == () and cand.event_time is None


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("short enough", 200, "short enough"),
        ("hello world this is long", 14, "hello world"),
        ("hello world, this", 13, "hello world"),
        ("exactly ten", 11, "exactly ten"),
        ("abcdefghijklmnop", 10, "abcdefghij"),
        ("我" * 250, 200, "我" * 200),
    ],
)
def test_clip_text_at_word_boundary(text: str, limit: int, expected: str) -> None:
    assert clip_text(text, limit) == expected
    assert len(clip_text(text, limit)) <= limit


def test_long_content_is_cut_to_max_chars() -> None:
    long = "word " * 100
    [cand] = parse_judge_output(json.dumps([item(long)]), NEW, max_chars=50)
    assert len(cand.content) <= 50 and cand.content.endswith("word")


def test_extract_json_prefers_outer_truncated_array_to_inner_object() -> None:
    assert extract_json('[{"a": 1}, {"a": 2}, {"a"') == [{"a": 1}, {"a": 2}]


def test_string_with_brackets_and_escapes_survives_truncation() -> None:
    text = r'[{"content": "x ]} \" y"}, {"content": "tru'
    assert extract_json(text) == [{"content": 'x ]} " y'}]
