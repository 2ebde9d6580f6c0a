"""How much checking one text may cost: a bound on the candidates validated.

Every recognizer that checks its candidates in Python (a Luhn digit, a
checksum, a parse by ``phonenumbers``, a public-suffix look-up) first finds
them with a regular expression, which is linear in the text and fast; the
checks are what an adversarial text (100 KB of ``1.2.3.4``, of digits and
separators) multiplies. So each recognizer validates, per text, its
candidates in text order until their total length passes :data:`BUDGET`
characters; every candidate past that point is **taken as found without its
check**, as the recognizer's kind (fail closed: a degenerate text is
over-masked, never let through). The work per text is then the regular
expressions' linear scan plus at most a budget's worth of checks.

The budget is far above what a memory holds (the longest LoCoMo and BEAM
turns come to a few hundred candidate characters per recognizer,
docs/benchmarks.md), so a real text is always checked whole.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from streams.consolidation.rules.sensitive.kinds import Finding, Kind

BUDGET: Final = 4096
"""Characters of candidates one recognizer validates in one text."""

Span = tuple[int, int]


def checked_each(candidates: Iterable[Span], check: Callable[[int, int], Finding | None],
                 kind: Kind, budget: int = BUDGET) -> list[Finding]:
    """``check`` each candidate span in text order while the budget lasts (it
    returns the finding, or ``None`` for a candidate that fails); past the
    budget a candidate is a finding of ``kind`` as it stands."""
    found: list[Finding] = []
    spent = 0
    for start, end in candidates:
        spent += end - start
        finding = check(start, end) if spent <= budget else Finding(start, end, kind)
        if finding is not None:
            found.append(finding)
    return found


def checked_prefix(text: str, candidates: Iterable[Span], run: Callable[[str], list[Finding]],
                   kind: Kind, budget: int = BUDGET) -> list[Finding]:
    """For a recognizer that checks a whole text at once (``run``): ``run`` on
    the longest prefix whose candidates fit the budget, and every candidate
    reaching past that prefix a finding of ``kind`` as it stands."""
    spans = sorted(s for s in candidates if s[1] > s[0])
    spent = 0
    for at, (start, end) in enumerate(spans):
        spent += end - start
        if spent > budget:
            cut = start
            unchecked = [Finding(s, e, kind) for s, e in spans[at:]]
            unchecked += [Finding(s, e, kind) for s, e in spans[:at] if e > cut]
            return [f for f in run(text[:cut]) if f.end <= cut] + unchecked
    return run(text)
