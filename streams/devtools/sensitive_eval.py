"""Scoring a sensitive-content detector against the labelled corpus.

The corpus (``tests/data/sensitive_corpus.jsonl``, written by
``bench/sensitive_corpus.py``) gives per sentence the expected spans as
``{"kind", "text"}``. A finding *matches* an expected span when the kinds
are equal and the spans share a character (a mask covering most of a card
number still hides it; boundaries are reported apart, as exact matches).
Per kind: recall is the share of expected spans matched, precision the share
of findings that match one. Kinds the detector does not look for (names and
places without NER) are left out of the figures.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from streams.consolidation.rules.sensitive.kinds import Finding, Kind

CORPUS = Path(__file__).resolve().parents[2] / "tests" / "data" / "sensitive_corpus.jsonl"


@dataclass(frozen=True)
class Sentence:
    """One labelled line: its text, language and expected findings."""

    text: str
    lang: str
    expected: tuple[Finding, ...]


@dataclass
class Tally:
    """One kind's counts over the corpus."""

    expected: int = 0
    found: int = 0        # expected spans matched by a finding
    exact: int = 0        # of those, matched with the same boundaries
    predicted: int = 0    # findings of the kind
    correct: int = 0      # findings matching an expected span

    @property
    def recall(self) -> float:
        return self.found / self.expected if self.expected else 1.0

    @property
    def precision(self) -> float:
        return self.correct / self.predicted if self.predicted else 1.0


@dataclass
class Score:
    """Tallies per kind, and the sentences that went wrong (for reading)."""

    kinds: dict[Kind, Tally] = field(default_factory=dict)
    misses: list[tuple[str, str]] = field(default_factory=list)  # (what, sentence)

    def tally(self, kind: Kind) -> Tally:
        return self.kinds.setdefault(kind, Tally())


def load(path: Path = CORPUS) -> list[Sentence]:
    """The corpus's sentences, each expected span located in its text."""
    sentences = []
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        text = row["text"]
        expected = []
        for span in row["spans"]:
            start = text.index(span["text"])
            expected.append(Finding(start, start + len(span["text"]), Kind(span["kind"])))
        sentences.append(Sentence(text, row["lang"], tuple(sorted(expected))))
    return sentences


def score(sentences: Iterable[Sentence], detect: Callable[[str], list[Finding]],
          kinds: frozenset[Kind]) -> Score:
    """Run ``detect`` on every sentence and count, for ``kinds`` only."""
    result = Score()
    for sentence in sentences:
        found = [f for f in detect(sentence.text) if f.kind in kinds]
        expected = [e for e in sentence.expected if e.kind in kinds]
        for e in expected:
            tally = result.tally(e.kind)
            tally.expected += 1
            hits = [f for f in found if f.kind is e.kind and f.overlaps(e)]
            tally.found += bool(hits)
            tally.exact += any((f.start, f.end) == (e.start, e.end) for f in hits)
            if not hits:
                result.misses.append((f"missed {e.kind}", sentence.text))
        for f in found:
            tally = result.tally(f.kind)
            tally.predicted += 1
            right = any(e.kind is f.kind and f.overlaps(e) for e in expected)
            tally.correct += right
            if not right:
                result.misses.append(
                    (f"false {f.kind} {sentence.text[f.start:f.end]!r}", sentence.text))
    return result
