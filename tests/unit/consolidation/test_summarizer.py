"""A summary is cut to its budget at whole lines."""

from __future__ import annotations

from streams.consolidation.summarizer import clip_lines


def test_clip_lines_never_cuts_inside_a_line() -> None:
    text = "aaa bbb\nccc\nddd eee fff"
    assert clip_lines(text, 5, lambda s: len(s.split())) == "aaa bbb\nccc"
    assert clip_lines(text, 1, lambda s: len(s.split())) == ""
