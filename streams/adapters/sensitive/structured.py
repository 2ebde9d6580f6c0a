"""Structured kinds by Microsoft Presidio's validated pattern recognizers.

Which recognizers, as Presidio ships them: payment cards (pattern and Luhn
check; Mastercard's 2221-2720 range, issued since 2017, is added: Presidio's
pattern knows only 51-55), IBANs (per-country format and ISO 13616 mod-97 checksum), e-mail
addresses (pattern and a known top-level domain), phone numbers
(``phonenumbers``' matcher at leniency VALID, for the regions in
:data:`REGIONS` and any number written with ``+`` and a country code), IPv4
and IPv6 addresses, US social security numbers (the ``###-##-####`` form
Presidio scores medium, with its invalid-group checks) and UK national
insurance numbers.

Offline by construction: the engine is built with Presidio's ``NoOpNlpEngine``
(its default engine would download ``en_core_web_lg``; these recognizers use
no language model), and the e-mail check reads the public-suffix snapshot
bundled in ``tldextract`` instead of fetching the list on first use (which
Presidio's own e-mail recognizer does, and which waits on the network).
Context words are not used: a finding stands on its pattern and validation.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Final

import tldextract
from presidio_analyzer import AnalyzerEngine, Pattern, RecognizerRegistry
from presidio_analyzer.nlp_engine import NoOpNlpEngine
from presidio_analyzer.predefined_recognizers import (
    CreditCardRecognizer,
    EmailRecognizer,
    IbanRecognizer,
    IpRecognizer,
    PhoneRecognizer,
    UkNinoRecognizer,
    UsSsnRecognizer,
)

from streams.consolidation.rules.sensitive.kinds import Finding, Kind

REGIONS: Final = ("US", "GB", "CN")
"""Phone numbers written without a country code are read as these regions'."""

ENTITIES: Final[dict[str, Kind]] = {
    "CREDIT_CARD": Kind.CARD,
    "IBAN_CODE": Kind.IBAN,
    "EMAIL_ADDRESS": Kind.EMAIL,
    "PHONE_NUMBER": Kind.PHONE,
    "IP_ADDRESS": Kind.IP,
    "US_SSN": Kind.NATIONAL_ID,
    "UK_NINO": Kind.NATIONAL_ID,
}

MIN_SCORE: Final = 0.4
"""Below it a Presidio result is a guess its own authors call weak (the SSN
recognizer's bare nine digits score 0.05); phone numbers score 0.4."""

MASTERCARD_2_SERIES: Final = Pattern(
    "Mastercard 2-series", r"\b2(?:2[2-9]\d|[3-6]\d\d|7[01]\d|720)[- ]?\d{4}[- ]?\d{4}[- ]?\d{4}\b",
    0.3)

_SUFFIXES = tldextract.TLDExtract(cache_dir=None, suffix_list_urls=())
_DECIMAL = re.compile(r"\d+\.\d+")
EXAMPLE_DOMAINS: Final = frozenset({"example.com", "example.org", "example.net"})
"""Reserved for examples (RFC 2606): an address there is nobody's (an agent's code
samples are full of them)."""


class _OfflineEmailRecognizer(EmailRecognizer):
    """Presidio's e-mail recognizer, its domain checked against the bundled list (and
    not one reserved for examples)."""

    def validate_result(self, pattern_text: str) -> bool:
        # the domain after the last "@" is a registered one, and the part before it is
        # no path ("cdn.jsdelivr.net/npm/bootstrap@5.3.0" is a package, not an address)
        local, _, domain = pattern_text.rpartition("@")
        parts = _SUFFIXES(domain)
        return (bool(local) and "/" not in local and bool(parts.fqdn)
                and parts.top_domain_under_public_suffix.lower() not in EXAMPLE_DOMAINS)


class StructuredRecognizers:
    """One Presidio engine; :meth:`findings` keeps no state between calls."""

    def __init__(self, regions: tuple[str, ...] = REGIONS) -> None:
        registry = RecognizerRegistry(supported_languages=["en"])
        recognizers: list[Any] = [
            CreditCardRecognizer(patterns=[*CreditCardRecognizer.PATTERNS, MASTERCARD_2_SERIES]),
            IbanRecognizer(), _OfflineEmailRecognizer(),
            IpRecognizer(), UsSsnRecognizer(), UkNinoRecognizer(),
            PhoneRecognizer(supported_regions=regions)]
        for recognizer in recognizers:
            registry.add_recognizer(recognizer)
        nlp = NoOpNlpEngine(models=[{"lang_code": "en", "model_name": "none"}])
        self._engine = AnalyzerEngine(registry=registry, nlp_engine=nlp,
                                      supported_languages=["en"])
        self._entities = list(ENTITIES)

    def findings(self, text: str) -> list[Finding]:
        """What the recognizers find in ``text`` (offsets into ``text``)."""
        results = self._engine.analyze(text=text, language="en", entities=self._entities,
                                       score_threshold=MIN_SCORE)
        found = [Finding(r.start, r.end, ENTITIES[r.entity_type]) for r in results
                 if r.end > r.start]
        return [f for f in found if not _names_nobody(text, f)]


def _names_nobody(text: str, f: Finding) -> bool:
    """A finding of a recognizer that names no one: a decimal fraction read as a phone
    number (``0.1073741824``, code and maths are full of them), a loopback or
    unspecified address (``127.0.0.1``, ``0.0.0.0``: every machine's own)."""
    value = text[f.start:f.end]
    if f.kind is Kind.PHONE:
        before = text[f.start - 1:f.start]
        after = text[f.end:f.end + 2]
        return (_DECIMAL.fullmatch(value) is not None or before == "."
                or (after[:1] == "." and after[1:2].isdigit()))
    if f.kind is Kind.IP:
        try:
            address = ipaddress.ip_address(value)
        except ValueError:
            return False
        return address.is_loopback or address.is_unspecified
    return False
