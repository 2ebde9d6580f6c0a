"""What sensitive content is: a closed set of kinds, and where one was found.

A :class:`Finding` is a kind and a half-open character span ``[start, end)``
of the text it was found in; it never carries the text itself, so findings
may be counted, logged and attached to provenance without leaking what they
point at.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from enum import StrEnum


class Kind(StrEnum):
    """Every kind of sensitive content memstream tells apart."""

    CARD = "card"                # payment card number, Luhn-valid
    IBAN = "iban"                # bank account, ISO 13616 checksum-valid
    EMAIL = "email"
    PHONE = "phone"
    NATIONAL_ID = "national_id"  # US SSN, UK NINO, Chinese resident id
    SECRET = "secret"            # API keys, tokens, private keys, stated passwords
    IP = "ip"
    NAME = "name"                # a person's name (NER)
    LOCATION = "location"        # a place (NER)


PLACEHOLDER: dict[Kind, str] = {
    Kind.CARD: "[CARD]",
    Kind.IBAN: "[IBAN]",
    Kind.EMAIL: "[EMAIL]",
    Kind.PHONE: "[PHONE]",
    Kind.NATIONAL_ID: "[ID]",
    Kind.SECRET: "[SECRET]",
    Kind.IP: "[IP]",
    Kind.NAME: "[NAME]",
    Kind.LOCATION: "[LOCATION]",
}

STRUCTURED: frozenset[Kind] = frozenset(Kind) - {Kind.NAME, Kind.LOCATION}
"""The kinds found by validated patterns; the others need a language model (NER)."""


@dataclass(frozen=True, order=True, slots=True)
class Finding:
    """``kind`` found at ``text[start:end]``; ``0 <= start < end``."""

    start: int
    end: int
    kind: Kind

    def __post_init__(self) -> None:
        if not 0 <= self.start < self.end:
            raise ValueError(f"empty or negative span {self.start}..{self.end}")

    def overlaps(self, other: Finding) -> bool:
        """Whether the two spans share at least one character."""
        return self.start < other.end and other.start < self.end


def resolved(findings: list[Finding]) -> list[Finding]:
    """The findings in text order with overlaps settled: a structured finding
    (a validated pattern) beats an overlapping name or place (a model's
    guess); between two of the same sort the longer one stays (the earlier on
    a tie, then the first kind by name), so a card number is not also reported as
    the phone number inside it."""
    ordered = sorted(findings, key=lambda f: (f.kind not in STRUCTURED, -(f.end - f.start),
                                              f.start, f.kind))
    # the kept spans are disjoint, so sorted by start they are sorted by end too: a
    # candidate overlaps one of them only if it overlaps its neighbours there
    starts: list[int] = []
    kept: list[Finding] = []
    for finding in ordered:
        at = bisect_right(starts, finding.start)
        if at and kept[at - 1].end > finding.start:
            continue
        if at < len(kept) and kept[at].start < finding.end:
            continue
        starts.insert(at, finding.start)
        kept.insert(at, finding)
    return kept
