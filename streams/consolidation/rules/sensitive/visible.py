"""The text a reader sees: invisible format characters taken out, offsets kept.

A zero-width space, joiner or non-joiner (U+200B-U+200D), a word joiner
(U+2060), a byte-order mark (U+FEFF), a soft hyphen (U+00AD) and the other
invisible format characters of Unicode's category Cf (direction marks and
embeddings, the Mongolian vowel separator, invisible operators, tag characters),
the nonspacing marks (Mn: a combining accent over a digit, variation selectors)
and the blank fillers (Hangul fillers, the Braille blank) show nothing or next
to nothing,
so ``4111``, a zero-width space and ``1111 1111 1111`` read as a card number;
written inside a value, they would hide it from every pattern.
Detection reads :func:`visible`'s text, and :meth:`Visible.original` turns a
finding there back into the span of the text as written, the invisible
characters inside it included (masking replaces them too).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Final

from streams.consolidation.rules.sensitive.kinds import Finding

INVISIBLE: Final = importlib.import_module("regex").compile(
    r"[\p{Cf}\p{Mn}\u115f\u1160\u3164\uffa0\u2800]")
"""Every format character (Cf: zero-width spaces and joiners, direction marks, tag
characters, the byte-order mark, the soft hyphen …), every nonspacing mark (Mn:
combining accents, the grapheme joiner, variation selectors) and the blank fillers
that show as nothing (Hangul fillers, the Braille blank)."""


@dataclass(frozen=True, slots=True)
class Visible:
    """``text`` without the invisible characters; ``origin[i]`` is the offset in the
    written text of ``text[i]`` (empty when nothing was taken out)."""

    text: str
    origin: tuple[int, ...] = ()

    def original(self, finding: Finding) -> Finding:
        """``finding`` (a span of :attr:`text`) as a span of the written text."""
        if not self.origin:
            return finding
        return Finding(self.origin[finding.start], self.origin[finding.end - 1] + 1,
                       finding.kind)


def visible(text: str) -> Visible:
    """``text`` as read, and where each of its characters was written."""
    if INVISIBLE.search(text) is None:
        return Visible(text)
    kept: list[int] = []
    at = 0
    for m in INVISIBLE.finditer(text):
        kept += range(at, m.start())
        at = m.end()
    kept += range(at, len(text))
    return Visible(INVISIBLE.sub("", text), tuple(kept))
