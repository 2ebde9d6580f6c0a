"""Findings of a recognizer that name no one, though their shape is right.

Agent conversations are full of them: a decimal fraction read as a phone
number (``0.1073741824``), this machine's own addresses (``127.0.0.1``,
``0.0.0.0``), a version read as an IPv4 address (``version 2.4.1.0``, and any
dotted number longer than four parts: ``1.2.3.4.5``), a git remote in scp
form read as an e-mail address (``git@github.com:org/repo.git``) and a URL's
user (``ssh://git@host/…``; the password of ``scheme://user:pw@host`` is a
credential, found as one by ``patterns``).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Final

from streams.consolidation.rules.sensitive.kinds import Finding, Kind

_DECIMAL: Final = re.compile(r"\d+\.\d+")
_VERSION_BEFORE: Final = re.compile(
    r"(?:(?<![A-Za-z])(?:version|ver\.?|v\.?|release|rel\.?|build|firmware|fw|kernel|patch)"
    r"|版本号?|固件)\s*[:：#]?\s*$", re.I)
_SCP_PATH: Final = re.compile(r":(?:~|[\w.-]*/)")
_LOOKBACK: Final = 64  # characters read before an address (bounded: a check costs O(1))
_VERSION_LOOKBACK: Final = 16  # ... and before an IP, for a version's word


def names_nobody(text: str, f: Finding) -> bool:
    """Whether ``f``, found in ``text``, is one of the shapes above."""
    value = text[f.start:f.end]
    if f.kind is Kind.PHONE:
        before = text[f.start - 1:f.start]
        after = text[f.end:f.end + 2]
        return (_DECIMAL.fullmatch(value) is not None or before == "."
                or (after[:1] == "." and after[1:2].isdigit()))
    if f.kind is Kind.IP:
        return _not_an_address(text, f, value)
    if f.kind is Kind.EMAIL:
        before = text[max(0, f.start - _LOOKBACK):f.start]
        word = before.split()[-1] if before and not before[-1].isspace() else ""
        return _SCP_PATH.match(text, f.end) is not None or "://" in word
    return False


def _not_an_address(text: str, f: Finding, value: str) -> bool:
    before = text[max(0, f.start - _VERSION_LOOKBACK):f.start]
    longer = ((before[-2:-1].isdigit() and before[-1:] == ".")
              or (text[f.end:f.end + 1] == "." and text[f.end + 1:f.end + 2].isdigit()))
    if "." in value and (longer or _VERSION_BEFORE.search(before)):
        return True  # a part of a longer dotted number, or a version
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified
