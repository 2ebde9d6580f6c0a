"""A fact said word for word inside a message is read where it was said.

The rule judge keeps a user's sentence or clause as it was said ("I live in
Berlin." from "User: I live in Berlin. My card is …"), so most facts of a session
are a part of one of its episodes. Detection reads each episode whole; a fact
found inside one, at word boundaries, takes the episode's findings within it,
shifted (:func:`findings_within`), instead of being read again: the same text, in
more context (a number stated as an SSN in the message is one in the fact too).
A finding that crosses the fact's edge is cut at it and kept. A fact found in no
episode, or only inside a word, is read on its own. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence

from streams.consolidation.rules.sensitive.kinds import Finding


def _boundary(text: str, at: int) -> bool:
    """Whether ``at`` (0 … len) is not inside a word of ``text``."""
    return at <= 0 or at >= len(text) or not (text[at - 1].isalnum() and text[at].isalnum())


def said_within(fact: str, episodes: Sequence[str]) -> tuple[int, int] | None:
    """The first episode (index) holding ``fact`` at word boundaries, and where."""
    if not fact.strip():
        return None
    for i, text in enumerate(episodes):
        at = text.find(fact)
        while at >= 0:
            if _boundary(text, at) and _boundary(text, at + len(fact)):
                return i, at
            at = text.find(fact, at + 1)
    return None


def findings_within(found: Sequence[Finding], start: int, length: int) -> list[Finding]:
    """The findings of an episode that fall in ``[start, start + length)``, cut at its
    edges and shifted to the fact's offsets."""
    end = start + length
    return [Finding(max(f.start, start) - start, min(f.end, end) - start, f.kind)
            for f in found if f.start < end and f.end > start]
