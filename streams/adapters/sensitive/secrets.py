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


def credential_findings(text: str) -> list[Finding]:
    """Every match of the plugins' patterns. Where a pattern's first group holds
    a key-sized value (the quoted AWS secret, 40 characters) the group is the
    finding, not the words around it; a short group (GitHub's ``ghp``
    prefix) is part of the token."""
    found = []
    for pattern in _PATTERNS:
        for m in pattern.finditer(text):
            keyed = pattern.groups and len(m.group(1) or "") >= _KEY_SIZED
            start, end = m.span(1) if keyed else m.span()
            if end > start:
                found.append(Finding(start, end, Kind.SECRET))
    return found
