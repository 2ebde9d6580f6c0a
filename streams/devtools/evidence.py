"""The share of a question's evidence found among a reply's sources, one definition for
every benchmark harness (LoCoMo, BEAM)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def share_found(evidence: Sequence[str], sources: Iterable[str]) -> float:
    """The share of ``evidence`` (event ids) among ``sources``; 0.0 without evidence."""
    if not evidence:
        return 0.0
    found = set(sources)
    return sum(1 for e in evidence if e in found) / len(evidence)
