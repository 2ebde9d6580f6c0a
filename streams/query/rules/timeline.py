"""Questions about how something went over time, and the outline that answers them.

"Can you list the order in which I brought up the parts of my app?", "Summarize
how my resume has developed over the past months", "What's the timeline of my
move?": such a question names a whole project, not the turns that answer it.
Its answer is spread over many sessions, a statement or two each, and a budget
of whole passages (up to 1,000 characters each) holds a handful of sessions
and leaves the rest out.

:func:`asks_over_time` reads the intent, in English: an order ("in order", "in
what order", "the order in which", "chronological", "timeline", "sequence of"),
or a summary or the progress of something ("summary", "summarize", "recap",
"overview", "how my X has progressed / developed / evolved / changed over time /
so far / throughout …"). "Walk me through how to prove …" asks for steps, not a
history, and is not read; nor is "in order to".

:func:`outline_line` gives such a question each memory as an outline's line:
its first sentence (at least ``MIN_SENTENCE`` characters, so "Sure." does not
end it), cut at a word within ``max_chars``. The budget then holds a line of
every session it reaches, in date order (:mod:`.budget`), instead of a few
sessions whole; the memory's id and ``source_span`` lead to the whole text.
"""

from __future__ import annotations

import re

_ORDER = re.compile(
    r"\b(?:in\s+(?:what|which|chronological|the\s+right)\s+order"
    r"|the\s+order\s+(?:in\s+which|that|of)|in\s+order\b(?!\s+to\b)|chronolog\w*"
    r"|time\s*line|sequence\s+of|order\s+of\s+events)",
    re.IGNORECASE)
_SUMMARY = re.compile(r"\b(?:summar(?:y|ies|ize|ise|izing|ising)|recap|overview)\b",
                      re.IGNORECASE)
_PROGRESS = re.compile(
    r"\bhow\b[^.?!]{0,80}?\b(?:progress(?:ed)?|develop(?:ed)?|evolv(?:ed|e)|chang(?:ed|e)"
    r"|grown|grow|improv(?:ed|e))\b[^.?!]{0,60}?"
    r"\b(?:over\s+time|so\s+far|throughout|over\s+the\s+(?:past|last)|since|across)\b",
    re.IGNORECASE)
MAX_QUESTION_CHARS = 2000  # read this far: a longer text asks other things too
MIN_SENTENCE = 40
OUTLINE_CHARS = 160
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|[。！？]|\n")
_LAST_WORD = re.compile(r"\s+\S*$")


def asks_over_time(text: str) -> bool:
    """Whether ``text`` asks for an order, a summary or the progress of something."""
    head = text[:MAX_QUESTION_CHARS]
    return bool(_ORDER.search(head) or _SUMMARY.search(head) or _PROGRESS.search(head))


def outline_line(text: str, max_chars: int = OUTLINE_CHARS) -> str:
    """The first sentence of ``text`` of at least ``MIN_SENTENCE`` characters, cut at a
    word boundary within ``max_chars`` (a word longer than that is cut inside)."""
    text = text.strip()
    for m in _SENTENCE_END.finditer(text, min(MIN_SENTENCE, len(text)) - 1 if text else 0):
        if m.end() > max_chars:
            break
        return text[:m.end()].strip()
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    if not text[max_chars].isspace() and (word := _LAST_WORD.search(cut)) is not None:
        cut = cut[:word.start()]  # the word that goes on past the bound is left out
    return cut.rstrip()

