"""IBANs written in lower or mixed case (``de89 3704 0044 0532 0130 00``).

Presidio's IBAN recognizer reads capitals only, and made case-blind it would
take the next word into an IBAN written in capitals (``… 3456 please`` read as
``… 3456 PLEA``, which then fails its checksum). So it stays as shipped, and
a candidate holding a lower-case letter is read here: every prefix of it that
ends a group, longest first, is checked in capitals by Presidio's own
validation (ISO 13616 mod-97 checksum and the country's BBAN layout). A
candidate has at most 34 characters and a few separators: its check costs
O(1), and candidates are checked within the per-text budget (``budget``).
"""

from __future__ import annotations

import re
from typing import Final

from presidio_analyzer.predefined_recognizers import IbanRecognizer

from streams.consolidation.rules.sensitive.budget import checked_each
from streams.consolidation.rules.sensitive.kinds import Finding, Kind

_CANDIDATE: Final = re.compile(
    r"(?<![A-Za-z0-9])[A-Za-z]{2}\d{2}(?:[ -]?[A-Za-z0-9]{4}){2,7}(?:[ -]?[A-Za-z0-9]{1,3})?"
    r"(?![A-Za-z0-9])")
_SHORTEST: Final = 15  # characters of the shortest IBAN (Norway's)


class LowerCaseIbans:
    """Presidio's IBAN validation applied to lower- and mixed-case candidates."""

    def __init__(self) -> None:
        self._check = IbanRecognizer()

    def findings(self, text: str) -> list[Finding]:
        spans = [m.span() for m in _CANDIDATE.finditer(text)
                 if any(c.islower() for c in m.group())]
        return checked_each(spans, lambda s, e: self._longest_valid(text, s, e), Kind.IBAN)

    def _longest_valid(self, text: str, start: int, end: int) -> Finding | None:
        for stop in range(end, start + _SHORTEST - 1, -1):
            if not text[stop - 1].isalnum():
                continue
            compact = text[start:stop].replace(" ", "").replace("-", "").upper()
            if len(compact) >= _SHORTEST and self._check.validate_result(compact) is True:
                return Finding(start, stop, Kind.IBAN)
        return None
