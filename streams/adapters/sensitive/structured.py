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


class _OfflineEmailRecognizer(EmailRecognizer):
    """Presidio's e-mail recognizer, its domain checked against the bundled list."""

    def validate_result(self, pattern_text: str) -> bool:
        return bool(_SUFFIXES(pattern_text).fqdn)


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
        return [Finding(r.start, r.end, ENTITIES[r.entity_type]) for r in results
                if r.end > r.start]
