"""Credentials by detect-secrets' own patterns.

detect-secrets (Yelp) scans source files line by line; its plugins' deny-list
patterns are what is reused here, on free text: AWS access key ids (and a
40-character secret quoted near "aws ... key"), GitHub tokens (``ghp_``,
``gho_``, ``ghu_``, ``ghs_``, ``ghr_``), Slack tokens and webhooks, Stripe
live secret keys and OpenAI keys carrying the ``T3BlbkFJ`` marker. Its
entropy and keyword plugins are not used: they are written for code (they
flag any hex hash, and ``password = x`` assignments), and memstream states
its own rule for passwords said in prose
(``streams.consolidation.rules.sensitive.patterns``).
"""

from __future__ import annotations

import re
from typing import Final

from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.stripe import StripeDetector

from streams.consolidation.rules.sensitive.kinds import Finding, Kind

PLUGINS: Final = (AWSKeyDetector, GitHubTokenDetector, SlackDetector, StripeDetector,
                  OpenAIDetector)

_KEY_SIZED: Final = 16
_PATTERNS: Final[tuple[re.Pattern[str], ...]] = tuple(
    pattern for plugin in PLUGINS for pattern in plugin().denylist)

# detect-secrets reads source lines; on free text one of its patterns is quadratic
# (OpenAI's ``sk-[A-Za-z0-9-_]*[A-Za-z0-9]{20}T3BlbkFJ...``: from every ``sk-`` the
# ``*`` runs to the end of the run and backtracks, so 100 KB of ``sk-`` took 26 s,
# holding the GIL). Each pattern reads the text in windows of at most CHUNK
# characters, each overlapping the next by OVERLAP: a match no longer than OVERLAP
# (every key these plugins know; OpenAI's longest, ``sk-proj-``, is about 170) lies
# whole in some window, and the work is linear in the text. No pattern crosses a
# line end (no ``.`` with DOTALL, no class holding one), so a window may cut anywhere.
CHUNK: Final = 1024
OVERLAP: Final = 256


def windows(length: int) -> list[tuple[int, int]]:
    """The ``(start, end)`` of each window over a text of ``length`` characters:
    at most CHUNK long, each starting CHUNK - OVERLAP after the previous one."""
    if length <= CHUNK:
        return [(0, length)]
    step = CHUNK - OVERLAP
    return [(at, min(at + CHUNK, length)) for at in range(0, length - OVERLAP, step)]


def credential_findings(text: str) -> list[Finding]:
    """Every match of the plugins' patterns. Where a pattern's first group holds
    a key-sized value (the quoted AWS secret, 40 characters) the group is the
    finding, not the words around it; a short group (GitHub's ``ghp``
    prefix) is part of the token. Matches read in overlapping windows are
    joined where they overlap (a token longer than OVERLAP found in pieces)."""
    spans: list[tuple[int, int]] = []
    for at, end in windows(len(text)):
        chunk = text[at:end]
        for pattern in _PATTERNS:
            for m in pattern.finditer(chunk):
                keyed = pattern.groups and len(m.group(1) or "") >= _KEY_SIZED
                start, stop = m.span(1) if keyed else m.span()
                if stop > start:
                    spans.append((at + start, at + stop))
    joined: list[list[int]] = []
    for start, stop in sorted(spans):
        if joined and start < joined[-1][1]:
            joined[-1][1] = max(joined[-1][1], stop)
        else:
            joined.append([start, stop])
    return [Finding(start, stop, Kind.SECRET) for start, stop in joined]
