"""Passages: a long answer cut where its author cut it, into memories of a useful size.

An assistant's answer of several thousand characters (a plan, code with its
explanation, a list of steps) is one turn but many things: kept whole it is
cut to the first 1,000 characters at query time, its vector sees only the
beginning, and one answer fills a quarter of the budget. :func:`passages`
cuts it into passages that retrieval can match and the budget can pack:

1. the text is read as blocks: a fenced code block (```` ``` ```` or ``~~~``
   to the closing fence) is one block, a markdown heading is one, a list item
   (``-``, ``*``, ``+``, ``1.``, ``1)``) with its indented continuation is
   one, and any other run of non-blank lines is a paragraph;
2. blocks are joined in order while the passage stays within ``target``
   characters; a heading always starts a passage, and neither a heading nor
   a block ending in a colon ("Here's the code:") is left at a passage's
   end; a short last block (under a quarter of ``target``) joins the passage
   before it when the two fit in ``limit``;
3. a block longer than ``limit`` is cut: code at line ends, prose at sentence
   ends, and a single line or sentence longer than ``limit`` at a space (or
   hard at ``limit``).

Each passage is the exact text ``text[start:end]`` (trimmed), so its
provenance is the message and the two offsets. A text of at most ``limit``
characters is one passage. At most ``max_passages`` are made; what follows
the last is not cut (the message itself stays in the conversation's log).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Literal

BlockKind = Literal["code", "heading", "item", "para"]

_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
_ITEM = re.compile(r"^\s?(?:[-*+]|\d{1,3}[.)])\s")  # an item; indented ones nest in it
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")


@dataclass(frozen=True)
class Passage:
    """``text`` is ``source[start:end]`` with the ends' whitespace trimmed."""

    text: str
    start: int
    end: int


@dataclass(frozen=True)
class _Block:
    kind: BlockKind
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def _lines(text: str) -> list[tuple[int, int]]:
    """Each line's (start, end) in ``text``, its newline included."""
    out, at = [], 0
    for line in text.splitlines(keepends=True):
        out.append((at, at + len(line)))
        at += len(line)
    return out


def blocks(text: str) -> list[_Block]:
    """The text's blocks in order (blank lines belong to none)."""
    out: list[_Block] = []
    lines = _lines(text)
    i = 0
    while i < len(lines):
        s, e = lines[i]
        line = text[s:e]
        if not line.strip():
            i += 1
            continue
        if (fence := _FENCE.match(line)) is not None:
            j = i + 1
            while j < len(lines) and not text[lines[j][0]:lines[j][1]].lstrip().startswith(
                    fence.group(1)):
                j += 1
            j = min(j, len(lines) - 1)
            out.append(_Block("code", s, lines[j][1]))
            i = j + 1
            continue
        if _HEADING.match(line):
            out.append(_Block("heading", s, e))
            i += 1
            continue
        kind: BlockKind = "item" if _ITEM.match(line) else "para"
        j = i + 1
        while j < len(lines):
            nxt = text[lines[j][0]:lines[j][1]]
            if not nxt.strip() or _FENCE.match(nxt) or _HEADING.match(nxt) or _ITEM.match(nxt):
                break
            j += 1
        out.append(_Block(kind, s, lines[j - 1][1]))
        i = j
    return out


def _cut_at_space(text: str, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    out = []
    while end - start > limit:
        cut = text.rfind(" ", start + limit // 2, start + limit)
        cut = cut if cut > start else start + limit
        out.append((start, cut))
        start = cut
    out.append((start, end))
    return out


def _pieces(text: str, b: _Block, limit: int) -> list[tuple[int, int]]:
    """A block as spans of at most ``limit`` characters: whole when it fits, else cut at
    line ends (code, lists) or sentence ends (prose), then at spaces."""
    if b.size <= limit:
        return [(b.start, b.end)]
    if b.kind == "para":
        bounds = [b.start, *(b.start + m.end() for m in _SENTENCE_END.finditer(
            text[b.start:b.end])), b.end]
    else:
        bounds = [b.start, *(e for _, e in _lines(text[b.start:b.end]))]
        bounds = [b.start, *(b.start + e for e in bounds[1:])]
    units = [(s, e) for s, e in itertools.pairwise(bounds) if e > s]
    out: list[tuple[int, int]] = []
    for s, e in units:
        for span in _cut_at_space(text, s, e, limit):
            if out and span[1] - out[-1][0] <= limit:
                out[-1] = (out[-1][0], span[1])
            else:
                out.append(span)
    return out


def _passage(text: str, start: int, end: int) -> Passage | None:
    raw = text[start:end]
    body = raw.strip()
    if not body:
        return None
    lead = len(raw) - len(raw.lstrip())
    return Passage(body, start + lead, start + lead + len(body))


def passages(text: str, *, target: int = 600, limit: int = 1000,
             max_passages: int = 64) -> list[Passage]:
    """``text`` as passages (see the module doc); one passage when it fits ``limit``."""
    if target < 1 or limit < target:
        raise ValueError("passages need 1 <= target <= limit")
    if len(text.strip()) <= limit:
        one = _passage(text, 0, len(text))
        return [one] if one is not None else []
    spans: list[tuple[int, int, bool, bool]] = []  # start, end, a heading, leads on
    for b in blocks(text):
        for s, e in _pieces(text, b, limit):
            heading = b.kind == "heading"
            spans.append((s, e, heading, heading or text[s:e].rstrip().endswith(":")))
    out: list[tuple[int, int]] = []
    open_end = False  # the passage being built ends with what leads into the next block
    for s, e, heading, leads in spans:
        if out and (open_end or (not heading and e - out[-1][0] <= target)) \
                and e - out[-1][0] <= limit:
            out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
            if len(out) > max_passages:
                break
        open_end = leads
    out = out[:max_passages]
    if len(out) >= 2 and out[-1][1] - out[-1][0] < target // 4 \
            and out[-1][1] - out[-2][0] <= limit:
        out[-2:] = [(out[-2][0], out[-1][1])]
    return [p for s, e in out if (p := _passage(text, s, e)) is not None]
