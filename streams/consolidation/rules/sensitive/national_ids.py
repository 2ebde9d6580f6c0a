"""National ids memstream recognizes itself: Chinese resident ids, and US social
security numbers stated as such without their dashes.

* Chinese resident identity numbers (GB 11643-1999): 18 characters, a
  six-digit region code, a birth date ``YYYYMMDD`` that exists, a three-digit
  sequence and an ISO 7064 MOD 11-2 check character (``0``-``9`` or ``X``);
  written whole or grouped with spaces or hyphens after the region, the year
  or the date (``110101 19900307 7777``, ``110101-1990-0307-7777``).
* A US SSN written as nine bare digits is any nine-digit number (orders,
  ZIP+4 codes, invoices), so it is taken only when stated as one: after
  ``SSN``, ``social security number``, ``social`` or ``社会安全号`` and at most
  a verb or a colon (``my SSN is 123456789``). Its groups must be ones the
  SSA issues (area 001-899 but 666, group 01-99, serial 0001-9999); a number
  its owner states as their SSN is taken even when it is a well-known sample
  (Presidio refuses ``123-45-6789`` said bare, as an example).

Candidates are validated within the per-text budget (``budget``).
"""

from __future__ import annotations

import re
from datetime import date
from typing import Final

from streams.consolidation.rules.sensitive.budget import checked_each
from streams.consolidation.rules.sensitive.kinds import Finding, Kind
from streams.consolidation.rules.sensitive.patterns import halfwidth

_RESIDENT_ID: Final = re.compile(
    r"(?<![0-9A-Za-z])[1-8]\d{5}[ -]?(?:18|19|20)\d{2}[ -]?\d{4}[ -]?\d{3}[0-9Xx]"
    r"(?![0-9A-Za-z])")
_WEIGHTS: Final = tuple(pow(2, 17 - i, 11) for i in range(17))
_CHECK: Final = "10X98765432"

_SSN_STATED: Final = re.compile(
    r"(?:(?<![A-Za-z])(?:ssns?|ss\#|social\s+security(?:\s+(?:number|no\.?|\#))?|social)"
    r"(?![A-Za-z])|社会安全号码?|社會安全號碼?|社安号)"
    r"[ \t]*(?:(?:number|no\.?|\#|号码|號碼)[ \t]*)?"
    r"(?:(?:is|was|would\s+be|=|是|为|為)[ \t]*)?[:：]?[ \t]*"
    r"(?<![\d-])(?P<ssn>\d{3}(?P<sep>[- ]?)\d{2}(?P=sep)\d{4})(?![\d-])", re.I)


def resident_id_valid(number: str) -> bool:
    """Whether an 18-character Chinese resident id has an existing birth date and
    the right ISO 7064 MOD 11-2 check character."""
    if len(number) != 18 or not number[:17].isdigit():
        return False
    try:
        date(int(number[6:10]), int(number[10:12]), int(number[12:14]))
    except ValueError:
        return False
    total = sum(int(d) * w for d, w in zip(number[:17], _WEIGHTS, strict=True))
    return _CHECK[total % 11] == number[17].upper()


def ssn_issuable(digits: str) -> bool:
    """Whether nine digits are an SSN the SSA could have issued."""
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    return ("001" <= area <= "899" and area != "666" and group != "00"
            and serial != "0000")


def resident_ids(text: str) -> list[Finding]:
    """Every valid Chinese resident id in ``text`` (full-width digits and grouped
    forms too)."""
    half = halfwidth(text)

    def check(start: int, end: int) -> Finding | None:
        number = half[start:end].replace(" ", "").replace("-", "")
        return Finding(start, end, Kind.NATIONAL_ID) if resident_id_valid(number) else None

    return checked_each((m.span() for m in _RESIDENT_ID.finditer(half)), check,
                        Kind.NATIONAL_ID)


def stated_ssns(text: str) -> list[Finding]:
    """Every US SSN in ``text`` stated as one, dashed, spaced or bare."""
    half = halfwidth(text)

    def check(start: int, end: int) -> Finding | None:
        digits = half[start:end].replace(" ", "").replace("-", "")
        return Finding(start, end, Kind.NATIONAL_ID) if ssn_issuable(digits) else None

    return checked_each((m.span("ssn") for m in _SSN_STATED.finditer(half)), check,
                        Kind.NATIONAL_ID)
