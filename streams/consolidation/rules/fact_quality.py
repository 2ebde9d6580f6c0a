"""Facts worth keeping: what the rule judge may keep of a sentence, and what it must not.

A fact is kept only when a reader of the memory alone would keep it: a
statement, complete, about the speaker or their work. :func:`defect` names
what is wrong with a text as a fact, or None:

============  =========================================================  =======================
defect        what                                                       example
============  =========================================================  =======================
``request``   asks for help or advice                                    "I need help with the
                                                                         login route"
``intent``    says what the speaker tries, wants understood or is        "I'm trying to
              unsure of, rather than what is (unless it also gives a     understand Bayes'
              new value: "…, which has recently improved to 78%")        theorem"
``question``  a question, with or without its mark                       "can you check my code"
``dangling``  a clause cut from its context: it leads into something    "I've got a function
              not kept (ends with a colon), leans on a sentence          that looks like this:",
              before it ("That way, …", "Plus, …"; an opening "So",     "Plus, it gives me peace
              "And", "Well", "Oh", "Yeah" is read past), or
              points back to what it does not name ("them",             of mind", "I have them
              "these", "those")                                          scheduled for May 3"
``markup``    code, markup or a formula, not words                       "<p>I'm Craig.</p>",
                                                                         "× 343/365 ≈ 0.493"
``fragment``  fewer than two words (a Han character counts as one)      "Done."
``long``      over 300 characters: a run-on no memory can hold whole     (a paragraph)
============  =========================================================  =======================

:func:`prose` gives the part of a message a judge reads: fenced code blocks,
block quotes (``>``) and table rows are removed, so an example inside an
answer ("Here's a sample journal entry: …") is never taken for what the
speaker says; inline code stays, as words of the sentence. The checks are
table-driven (tests/unit/consolidation/rules/test_fact_quality.py); ``make
bench-beam`` and ``make bench-locomo`` report the share of the judge's facts
that pass them.
"""

from __future__ import annotations

import re
from typing import Literal

from streams.memory.rules.recency import announces_change

Defect = Literal["request", "intent", "question", "dangling", "markup", "fragment", "long"]
MAX_FACT_CHARS = 300

_FENCED = re.compile(r"^\s{0,3}(```|~~~)[^\n]*\n.*?(?:^\s{0,3}\1[^\n]*$|\Z)", re.S | re.M)
_QUOTE_LINE = re.compile(r"^\s{0,3}>.*$", re.M)
_TABLE_LINE = re.compile(r"^[ \t]*\|[^\n]*\|[ \t]*$", re.M)  # [ \t]: linear on blank lines
_INLINE_CODE = re.compile(r"`[^`\n]*`")

_ASKS = re.compile(
    r"\b(?:can|could|would|will)\s+you\b"
    r"|\b(?:please\s+)?help\s+me\b|\bI\s+(?:need|want|would\s+like|'d\s+like)\s+(?:some\s+)?"
    r"(?:help|advice|guidance|assistance|suggestions|feedback|tips|you\s+to)\b"
    r"|\b(?:let\s+me\s+know|any\s+(?:ideas|suggestions|advice|tips)|what\s+do\s+you\s+think"
    r"|how\s+(?:can|do|should|would)\s+I)\b",
    re.I,
)
_INTENT = re.compile(
    r"\bI\s+(?:need|want|would\s+like|'d\s+like)\s+(?:to\s+know|to\s+make\s+sure|to\s+ensure"
    r"|to\s+understand|to\s+figure|to\s+see|to\s+check|to\s+confirm)\b"
    r"|\bI(?:'m|\s+am)\s+(?:\w+ly\s+)?(?:trying|struggling|having\s+(?:some\s+)?(?:trouble|issues"
    r"|problems|difficulty|a\s+hard\s+time)|wondering|not\s+sure|unsure|confused|stuck"
    r"|looking\s+for|hoping|curious)\b"
    r"|\bI\s+(?:wonder|was\s+wondering|don't\s+(?:know|understand|get))\b",
    re.I,
)
_AUX = r"(?:can|could|would|will|should|shall|do|does|did|is|are|am|was|were|have|has)"
_QUESTION_START = re.compile(
    rf"^(?:(?:so|and|but|or|also|then)\s+)?(?:{_AUX}\s+(?:you|i|we|it|there|this|that|they"
    rf"|he|she|my|your)\b|(?:what|where|when|who|whose|why|how|which)\s+{_AUX}\b)", re.I)
_MARKER = re.compile(  # what opens a statement without leaning on what came before
    r"^(?:(?:so|and|but|also|well|oh|yeah|yes|ok|okay|hmm|sure|anyway|btw|by\s+the\s+way"
    r"|actually|honestly|now)\b[\s,:;!.-]*)+", re.I)
_LEANS = re.compile(
    r"^(?:or|plus|then|that\s+way|this\s+way|because|since|which|however|if"
    r"|what\s+if|suppose|say|unless|whether"
    r"|though|although|otherwise|besides|instead|no|thanks|thank\s+you|it|they|there"
    r"|(?:that|this|these|those)(?!\s+(?:days?|weeks?|months?|years?|mornings?|evenings?"
    r"|nights?|time|weekends?|spring|summer|autumn|fall|winter|semester|term|quarter)\b)"
    r")\b[\s,]", re.I)
_POINTS_BACK = re.compile(  # "I have them scheduled", "I found these 3 idioms": to what?
    r"\b(?:them|these|those)\b(?!\s+(?:days?|weeks?|months?|years?|mornings?|evenings?"
    r"|nights?|times?|weekends?))", re.I)
_MARKUP = re.compile(r"</?[a-z][\w-]*(?:\s[^<>]*)?>|[=≈×÷√∑∫≤≥≠±]|\\[(\[a-z]"
                     r"|\b\w+\([^()\n]{0,80}\)|[{};]\s*$|^\s*(?:[-*+]|\d+[.)])\s|\*\*|__|##", re.I)
_WORD = re.compile(r"[\u4e00-\u9fff]|[^\W\d_]+(?:['’-][^\W\d_]+)*")  # a Han character counts


def prose(text: str) -> str:
    """``text`` without fenced code, block quotes and table rows; inline code keeps its
    text ("I added the `is-invalid` class") without the backticks."""
    text = _FENCED.sub("\n", text)
    text = _QUOTE_LINE.sub("", text)
    text = _TABLE_LINE.sub("", text)
    return _INLINE_CODE.sub(lambda m: m.group(0)[1:-1], text)


def defect(text: str) -> Defect | None:
    """What keeps ``text`` (a sentence or clause, without a ``"Name: "``) from being a fact
    worth keeping, or None when nothing does (see the module doc)."""
    s = _MARKER.sub("", text.strip().replace("’", "'"))  # "So I moved …": the statement
    if s.endswith(":") or _LEANS.match(s + " ") or _POINTS_BACK.search(s):
        return "dangling"
    if s.endswith("?") or _QUESTION_START.match(s):
        return "question"
    if _ASKS.search(s):
        return "request"
    if _INTENT.search(s) and not announces_change(s):
        return "intent"  # but "I'm trying to …, which has now improved to 78%" has news
    if _MARKUP.search(s):
        return "markup"
    if len(_WORD.findall(s)) < 2:
        return "fragment"
    if len(s) > MAX_FACT_CHARS:
        return "long"
    return None
