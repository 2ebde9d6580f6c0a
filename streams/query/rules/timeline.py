"""Questions about how something went over time, and the outline that answers them.

"Can you list the order in which I brought up the parts of my app?", "Summarize
how my resume has developed over the past months", "What's the timeline of my
move?": such a question names a whole project, not the turns that answer it.
Its answer is spread over many sessions, a statement or two each, and a budget
of whole passages (up to 1,000 characters each) holds a handful of sessions
and leaves the rest out.

:func:`asks_over_time` reads the intent in the caller's message (not its
context), in English and Chinese, when the message speaks of the user's own
history (I, my, we, our; 我): an order ("in what order", "the order in which",
"list … in order", "chronological", "timeline", "order of events", "sequence
of"; 顺序, 时间线), a summary ("summary", "summarize", "sum up", "recap",
"overview", "history of"; 总结, 概括, 回顾) or progress ("how has my X
progressed / evolved / developed / changed", "how my X has improved", "how
much progress"; 进展, 变化, 发展 beside 怎么, 以来, 至今 …). Not read: "in order
to / for / of", "order of magnitude", "the order in which I should …", "how do
I change …", "how did you change …", "the change I made", "walk me through how
to …" (steps, not a history), a text about something else ("Summarize this
article", "the notes I pasted", "Translate 'timeline'", 这篇文章), nor "I'm" or
"World War I" as the only first person.

:func:`outline_line` gives such a question each memory as an outline's line: of
its sentences (each at least ``MIN_SENTENCE`` characters, so "Sure." is not one),
the one holding most of the question's words (:func:`topic_terms`: not the ones
that ask for the order or the summary), the first on a tie, on one line, after an
episode's speaker's name ("User: …") unless it names its own, cut at a word
within ``max_chars``; :func:`outlined` leaves out a line that repeats one of its
cube. The budget then holds a line of every session it reaches, each session
dated once and in date order (:mod:`.budget`), instead of a few sessions whole;
the memory's id and ``source_span`` lead to the whole text.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import replace

from streams.memory.model import StoredMemory
from streams.memory.rules.fusion import speaker_of
from streams.memory.rules.lexical import tokenize

MAX_QUESTION_CHARS = 2000  # read this far: a longer text asks other things too
MIN_SENTENCE = 40
MAX_SENTENCES = 24  # of one memory, read for the line (the rest is never chosen)
OUTLINE_CHARS = 160

_MINE = re.compile(r"\bI\s+[a-z]|(?i:\b(?:my|mine|myself|we|our|ours|us)\b)|我")
_ORDER = re.compile(
    r"\bin\s+(?:what|which|chronological|the)\s+order\b"
    r"|\bthe\s+order\s+(?:in\s+which\s+|that\s+)?(?:I|we)\b"
    r"(?!\s+(?:should|must|need|ought|have\s+to|can|could|will|would)\b)"
    r"|\b(?:list|name|rank|put|arrange|sort|tell)\b[^.?!]{0,80}?\bin\s+order\b"
    r"(?!\s+(?:to|for|of)\b)"
    r"|\bchronolog\w*|\btime\s*line\b|\border\s+of\s+events\b|\bearliest\s+to\s+latest\b"
    r"|\bsequence\s+of\b"
    r"|顺序|时间线|先后", re.IGNORECASE)
_SUMMARY = re.compile(
    r"\b(?:summar(?:y|ies|ize|ise|ized|ised|izing|ising)|sum\s+up|recap|overview"
    r"|history\s+of)\b|总结|概括|回顾", re.IGNORECASE)
# the verbs, not the nouns: "how did the feedback shape the improvements I made" asks no history
_CHANGE = (r"(?<!\bthe\s)(?<!\ba\s)(?<!\bany\s)\b(?:progress(?:ed|ing)?|evolv(?:e|ed|ing)"
           r"|develop(?:ed|ing)?|chang(?:e|ed|ing)|grow(?:n|ing)?|grew|improv(?:e|ed|ing))\b")
_PROGRESS = re.compile(
    r"\bhow\s+(?:has|have|had|did|is|are|was|were)\s+(?!you\b)[^.?!]{0,80}?" + _CHANGE
    + r"|\bhow\s+(?:my|our)\b[^.?!]{0,60}?" + _CHANGE
    + r"|\bhow\s+much\s+progress\b", re.IGNORECASE)
_ZH_PROGRESS = re.compile(r"进展|变化|发展|进步")
_ZH_OVER_TIME = re.compile(r"以来|到现在|至今|过程|一直|怎么|如何|怎样")
_NOT_A_HISTORY = re.compile(
    r"\b(?:this|these|that|those|the(?:\s+following)?)\s+(?:\w+\s+)?(?:article|text|document"
    r"|paper|email|passage|code|diff|patch|file|page|thread|notes|transcript|report"
    r"|meeting)s?\b|\b(?:pasted|attached)\b|\btranslat\w*\b"
    r"|这篇|这段|这份|文章|以下|上面|下面", re.IGNORECASE)
_INTENT_WORDS = frozenset(tokenize(
    "order chronological chronologically timeline sequence summary summarize summarise "
    "recap overview history progress progressed progressing evolve evolved evolving "
    "develop developed developing change changed changing improve improved improving "
    "grow grew grown brought time over far"))
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|[。！？]|\n")


def asks_over_time(message: str) -> bool:
    """Whether ``message`` asks for an order, a summary or the progress of the user's
    own things."""
    head = message[:MAX_QUESTION_CHARS]
    if not _MINE.search(head) or _NOT_A_HISTORY.search(head):
        return False
    return bool(_ORDER.search(head) or _SUMMARY.search(head) or _PROGRESS.search(head)
                or (_ZH_PROGRESS.search(head) and _ZH_OVER_TIME.search(head)))


def topic_terms(terms: Iterable[str]) -> list[str]:
    """The search ``terms`` of such a question without the words that ask for the order
    or the summary ("timeline", "progress"): what the lines should be about."""
    return [t for t in terms if t not in _INTENT_WORDS]


def _sentences(text: str) -> list[tuple[int, int]]:
    """The spans of ``text``'s first ``MAX_SENTENCES`` sentences, a sentence shorter than
    ``MIN_SENTENCE`` joined to the next; a short tail after the last one is no sentence."""
    out: list[tuple[int, int]] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        if m.end() - start >= MIN_SENTENCE:
            out.append((start, m.end()))
            start = m.end()
            if len(out) == MAX_SENTENCES:
                return out
    if start < len(text) and text[start:].strip() and (
            not out or len(text) - start >= MIN_SENTENCE):  # not a short tail ("Berlin!")
        out.append((start, len(text)))
    return out


def _cut(text: str, max_chars: int) -> str:
    """``text`` within ``max_chars``, cut after a word when one ends in its second half,
    else hard (a run without spaces: Chinese, a long URL)."""
    if len(text) <= max_chars:
        return text
    end = max_chars
    if not text[end].isspace():
        while end > max_chars // 2 and not text[end - 1].isspace():
            end -= 1
        if end <= max_chars // 2:
            end = max_chars
    return text[:end].rstrip()


def outline_line(text: str, max_chars: int = OUTLINE_CHARS,
                 terms: Collection[str] = (), speaker: str | None = None) -> str:
    """The sentence of ``text`` that holds most of ``terms`` (search terms, as
    :func:`~streams.memory.rules.lexical.tokenize` gives them, each found as part of the
    sentence's text; the first sentence on a tie or without terms), on one line, after
    ``speaker``'s name (the speaker of an episode written ``"Name: text"``) when it is
    not the first sentence and names no speaker of its own, cut within ``max_chars``."""
    text = text.strip()
    spans = _sentences(text)
    if not spans:
        return ""
    best, best_held = spans[0], -1
    if terms and len(spans) > 1:
        wanted, folded = set(terms), text.casefold()
        for span in spans:  # a term is held where it is part of the text: stems are
            piece = folded[span[0]:span[1]]  # a word's beginning ("mov" of "moved")
            held = sum(1 for t in wanted if t in piece)
            if held > best_held:
                best, best_held = span, held
    line = " ".join(text[best[0]:best[1]].split())
    if best[0] > 0 and speaker is not None and speaker_of(line) is None:
        line = f"{speaker}: {line}"
    return _cut(line, max_chars)


def outlined(memories: Sequence[StoredMemory], max_chars: int,
             terms: Collection[str]) -> list[StoredMemory]:
    """``memories`` (best first) as outline lines (:func:`outline_line`), a line that
    repeats one already kept in the same cube ("Assistant: Great question!") left out."""
    seen: set[tuple[str, str]] = set()
    out = []
    for m in memories:
        speaker = speaker_of(m.content) if m.kind == "episode" else None
        line = outline_line(m.content, max_chars, terms, speaker)
        if (m.cube, line) not in seen:
            seen.add((m.cube, line))
            out.append(replace(m, content=line))
    return out
