"""The passage cutter: a long answer cut where its author cut it, every passage the exact
text between its offsets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.consolidation.rules.passages import blocks, passages

PROSE = "This is one sentence of prose. " * 12  # ~370 characters
CODE = "```python\n" + "".join(f"x_{i} = compute({i})\n" for i in range(80)) + "```\n"


def kinds(text: str) -> list[str]:
    return [b.kind for b in blocks(text)]


@pytest.mark.parametrize(("text", "expected"), [
    ("one paragraph\nstill it\n\nanother", ["para", "para"]),
    ("# Title\nbody line", ["heading", "para"]),
    ("```\ncode\n\nmore code\n```\nafter", ["code", "para"]),
    ("~~~\nunclosed fence\n\nto the end", ["code"]),
    ("- item one\n  continued\n- item two\n   - nested\n1. numbered", ["item", "item", "item"]),
    ("text then\n- an item", ["para", "item"]),
    ("\n\n   \n", []),
])
def test_blocks_are_code_headings_items_and_paragraphs(text: str, expected: list[str]) -> None:
    assert kinds(text) == expected


@pytest.mark.parametrize(("text", "count"), [
    ("", 0),
    ("   ", 0),
    ("short answer", 1),
    ("x" * 1000, 1),  # at the limit: whole
    (PROSE * 3, 2),  # ~1,100 characters of prose: cut at sentences, passages of <= 600
])
def test_a_text_within_the_limit_is_one_passage(text: str, count: int) -> None:
    assert len(passages(text)) == count


def test_code_and_its_explanation_are_cut_at_their_own_boundaries() -> None:
    text = "## Setup\nInstall it first.\n\n" + CODE + "\n### Why\n" + PROSE
    got = passages(text, target=600, limit=1000)
    assert got[0].text.startswith("## Setup\nInstall it first.")
    code = [p for p in got if "compute(" in p.text]
    assert len(code) >= 2 and all(len(p.text) <= 1000 for p in code)
    assert all(p.text.endswith(")") or p.text.endswith("```") for p in code)  # at line ends
    assert got[-1].text.startswith("### Why")


def test_a_heading_or_a_lead_in_is_never_left_at_the_end_of_a_passage() -> None:
    text = PROSE + "\n\n# Next part\n\n" + PROSE + "\n\nHere is the list:\n\n- a\n- b\n" + PROSE
    for p in passages(text, target=400, limit=800):
        last = p.text.splitlines()[-1]
        assert not last.startswith("#")
    assert any(p.text.startswith("# Next part") for p in passages(text, target=400, limit=800))


def test_a_single_line_longer_than_the_limit_is_cut_at_spaces() -> None:
    text = "word " * 600  # one paragraph line of 3,000 characters, no sentence end
    got = passages(text, target=600, limit=1000)
    assert all(len(p.text) <= 1000 for p in got)
    assert "".join(p.text.replace(" ", "") for p in got) == text.replace(" ", "")


def test_at_most_max_passages_are_made() -> None:
    text = "\n\n".join(f"Paragraph {i}. " + "words " * 150 for i in range(50))
    got = passages(text, target=600, limit=1000, max_passages=5)
    assert len(got) == 5
    assert got[0].text.startswith("Paragraph 0.")


@pytest.mark.parametrize(("target", "limit"), [(0, 10), (20, 10)])
def test_bad_sizes_are_refused(target: int, limit: int) -> None:
    with pytest.raises(ValueError):
        passages("text", target=target, limit=limit)


markdownish = st.lists(st.sampled_from([
    "plain words here. ", "another sentence! ", "\n", "\n\n", "# head\n", "- item\n",
    "  - nested\n", "1. first\n", "```\n", "code();\n", "x" * 300, "Here it is:\n", "   ",
]), max_size=120).map("".join)


@given(markdownish, st.integers(50, 700), st.integers(0, 600))
def test_every_passage_is_the_exact_text_between_its_offsets_in_order(
        text: str, target: int, extra: int) -> None:
    limit = target + extra
    got = passages(text, target=target, limit=limit)
    ends = 0
    for p in got:
        assert text[p.start:p.end] == p.text == p.text.strip() != ""
        assert len(p.text) <= max(limit, len(text.strip())) if len(got) == 1 else len(
            p.text) <= limit
        assert p.start >= ends
        ends = p.end
    # nothing but whitespace is left out (within the passage count's bound)
    covered = " ".join(text[p.start:p.end] for p in got)
    assert "".join(covered.split()) == "".join(text[:ends].split())
