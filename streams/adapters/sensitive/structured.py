"""Structured kinds by Microsoft Presidio's validated pattern recognizers.

Which recognizers, as Presidio ships them: payment cards (pattern and Luhn
check; Mastercard's 2221-2720 range, issued since 2017, is added: Presidio's
pattern knows only 51-55; the groups may be split by ``.``, ``/`` or one line
break as well as a hyphen or a space), IBANs (per-country format and ISO 13616
mod-97 checksum; written in lower case: ``ibans``), e-mail addresses (pattern and a known
top-level domain), phone numbers (``phonenumbers``' matcher at leniency VALID,
for the regions in :data:`REGIONS` and any number written with ``+`` and a
country code), IPv4 and IPv6 addresses, US social security numbers (the
``###-##-####`` form Presidio scores medium, with its invalid-group checks)
and UK national insurance numbers.

Offline by construction: the recognizers are run one by one, with no NLP
engine (Presidio's default engine would download ``en_core_web_lg``; these
recognizers use no language model), and the e-mail check reads the
public-suffix snapshot bundled in ``tldextract`` instead of fetching the list
on first use (which Presidio's own e-mail recognizer does, and which waits on
the network). Context words are not used: a finding stands on its pattern and
validation. Each recognizer validates at most a budget of candidates per
text (``streams.consolidation.rules.sensitive.budget``): its candidates are
its own patterns' matches (for phone numbers, the ``phonenumbers`` matcher's
candidate pattern).
"""

from __future__ import annotations

import importlib
import re
from typing import Any, Final

import tldextract
from phonenumbers.phonenumbermatcher import _PATTERN as PHONE_CANDIDATE
from presidio_analyzer import Pattern
from presidio_analyzer.predefined_recognizers import (
    CreditCardRecognizer,
    EmailRecognizer,
    IbanRecognizer,
    IpRecognizer,
    PhoneRecognizer,
    UkNinoRecognizer,
    UsSsnRecognizer,
)

from streams.consolidation.rules.sensitive.budget import BUDGET, checked_prefix
from streams.consolidation.rules.sensitive.kinds import Finding, Kind
from streams.consolidation.rules.sensitive.nobody import names_nobody

REGIONS: Final = ("US", "GB", "CN")
"""Phone numbers written without a country code are read as these regions'."""

MIN_SCORE: Final = 0.4
"""Below it a Presidio result is a guess its own authors call weak (the SSN
recognizer's bare nine digits score 0.05); phone numbers score 0.4."""

# between a card's groups: nothing, a hyphen, a space (a tab, a no-break, thin, figure or
# ideographic space too), a dot, a slash, or one line break
_SPACES: Final = " \t\u00a0\u2007\u2009\u202f\u3000"
_SEP: Final = rf"(?:[-./{_SPACES}]|[{_SPACES}]*\r?\n[{_SPACES}]*)?"
CARD_PATTERNS: Final = [
    Pattern("Card (Presidio's issuers, any separator)",
            rf"\b(?!1\d{{12}}(?!\d))(?:4\d{{3}}|5[0-5]\d{{2}}|6\d{{3}}|1\d{{3}}|3\d{{3}})"
            rf"{_SEP}(\d{{3,4}}){_SEP}(\d{{3,4}}){_SEP}(\d{{3,5}})\b", 0.3),
    Pattern("Mastercard 2-series",
            rf"\b2(?:2[2-9]\d|[3-6]\d\d|7[01]\d|720){_SEP}\d{{4}}{_SEP}\d{{4}}{_SEP}\d{{4}}\b",
            0.3)]
_CARD_SEPARATORS: Final = [("-", ""), (".", ""), ("/", ""), ("\r", ""), ("\n", ""),
                           *((c, "") for c in _SPACES)]

_REGEX: Any = importlib.import_module("regex")
"""Presidio's regular-expression engine (no type stubs): its patterns are read with
it, as Presidio reads them (the standard library's backtracks for ever over a long
base64 string on the e-mail pattern)."""

_SUFFIXES = tldextract.TLDExtract(cache_dir=None, suffix_list_urls=())
EXAMPLE_DOMAINS: Final = frozenset({"example.com", "example.org", "example.net"})
"""Reserved for examples (RFC 2606): an address there is nobody's (an agent's code
samples are full of them)."""


def deliverable(address: str) -> bool:
    """Whether the domain after the last ``@`` is a registered one (bundled public
    suffix list) not reserved for examples, and the part before it no path
    (``cdn.jsdelivr.net/npm/bootstrap@5.3.0`` is a package, not an address)."""
    local, _, domain = address.rpartition("@")
    parts = _SUFFIXES(domain)
    return (bool(local) and "/" not in local and bool(parts.fqdn)
            and parts.top_domain_under_public_suffix.lower() not in EXAMPLE_DOMAINS)


class _OfflineEmailRecognizer(EmailRecognizer):
    """Presidio's e-mail recognizer, its domain checked by :func:`deliverable`."""

    def validate_result(self, pattern_text: str) -> bool:
        return deliverable(pattern_text)


class _CardRecognizer(CreditCardRecognizer):
    """Presidio's card recognizer with the separators above: at most one line break,
    and a dot or a slash only between all the groups alike."""

    def __init__(self) -> None:
        super().__init__(patterns=CARD_PATTERNS, replacement_pairs=_CARD_SEPARATORS)

    def validate_result(self, pattern_text: str) -> bool:
        marks = {c for c in pattern_text if not c.isdigit() and not c.isspace()}
        if pattern_text.count("\n") > 1 or (marks & {".", "/"} and len(marks) > 1):
            return False
        return bool(super().validate_result(pattern_text))


MADE_OF_DIGITS = frozenset({Kind.CARD, Kind.IBAN, Kind.NATIONAL_ID, Kind.PHONE})
"""Kinds no value of which is without a decimal digit: a card's, an IBAN's check
digits, an SSN's, a NINO's, a phone number's (an IP address may be, in IPv6)."""
_DIGIT = re.compile(r"\d")  # any script's decimal digits (Unicode Nd), as the patterns'


class _Recognizer:
    """One Presidio recognizer, the kind it finds and its candidates' patterns."""

    def __init__(self, presidio: Any, kind: Kind, candidates: list[Any]) -> None:
        self.presidio = presidio
        self.kind = kind
        self.candidates = candidates

    def findings(self, text: str) -> list[Finding]:
        if len(text) * len(self.candidates) <= BUDGET:
            return self._checked(text)  # its candidates cannot pass the budget: no need to look
        spans = [m.span() for pattern in self.candidates for m in pattern.finditer(text)]
        return checked_prefix(text, spans, self._checked, self.kind)

    def _checked(self, text: str) -> list[Finding]:
        results = self.presidio.analyze(text, self.presidio.supported_entities, None)
        return [Finding(r.start, r.end, self.kind) for r in results
                if r.score >= MIN_SCORE and r.end > r.start]


def _patterns(recognizer: Any) -> list[Any]:
    return [_REGEX.compile(p.regex, flags=recognizer.global_regex_flags)
            for p in recognizer.patterns]


class StructuredRecognizers:
    """Presidio's recognizers, each run on its own; :meth:`findings` keeps no state
    between calls."""

    def __init__(self, regions: tuple[str, ...] = REGIONS) -> None:
        pattern_recognizers: list[tuple[Any, Kind]] = [
            (_CardRecognizer(), Kind.CARD), (IbanRecognizer(), Kind.IBAN),
            (_OfflineEmailRecognizer(), Kind.EMAIL), (IpRecognizer(), Kind.IP),
            (UsSsnRecognizer(), Kind.NATIONAL_ID), (UkNinoRecognizer(), Kind.NATIONAL_ID)]
        self._recognizers = [_Recognizer(r, kind, _patterns(r))
                             for r, kind in pattern_recognizers]
        self._recognizers.append(_Recognizer(PhoneRecognizer(supported_regions=regions),
                                             Kind.PHONE, [PHONE_CANDIDATE]))

    def findings(self, text: str) -> list[Finding]:
        """What the recognizers find in ``text`` (offsets into ``text``), but for
        what names nobody (``nobody``). A text without a decimal digit (of any
        script) is not read by the recognizers of kinds that are made of digits."""
        digits = _DIGIT.search(text) is not None
        found = [f for r in self._recognizers if digits or r.kind not in MADE_OF_DIGITS
                 for f in r.findings(text)]
        return [f for f in found if not names_nobody(text, f)]

