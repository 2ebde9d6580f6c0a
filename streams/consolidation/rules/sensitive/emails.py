"""E-mail addresses written so that an address pattern misses them:
``bob(at)gmail.com``, ``bob [at] gmail [dot] com``, ``bob at gmail dot com``.

An ``at`` in brackets (``(at)``, ``[at]``, ``{at}``, ``<at>``) is taken with any
dots, written or said (``.``, ``(dot)``, ``dot``). English says "at" and
"dot" all the time, so the bare word ``at`` is taken only with a bare or
bracketed ``dot`` after it (``I work at google.com`` is no address) and after
a name that is no common word (``look at example dot com``). Either way the
domain must be one (its last label a public suffix, not a domain reserved
for examples): the caller checks :func:`address` with the e-mail recognizer's
own domain check, within the per-text budget (``budget``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from streams.consolidation.rules.sensitive.budget import checked_each
from streams.consolidation.rules.sensitive.kinds import Finding, Kind

_AT_BRACKETED: Final = r"\s*[(\[{<]\s*at\s*[)\]}>]\s*"
_DOT_SAID: Final = r"(?:\s*[(\[{<]\s*dot\s*[)\]}>]\s*|\s+dot\s+)"
_LABEL: Final = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_LOCAL: Final = r"(?<![\w.%+-])(?P<local>[A-Za-z0-9][A-Za-z0-9._%+-]{0,63})"
_CANDIDATE: Final = re.compile(
    rf"{_LOCAL}(?:{_AT_BRACKETED}{_LABEL}(?:(?:\.|{_DOT_SAID}){_LABEL}){{1,6}}"
    rf"|\s+at\s+{_LABEL}(?:\.{_LABEL}){{0,5}}{_DOT_SAID}{_LABEL}"
    rf"(?:(?:\.|{_DOT_SAID}){_LABEL}){{0,5}})(?![\w@-]|\.\w)", re.I)
_AT: Final = re.compile(rf"{_AT_BRACKETED}|\s+at\s+", re.I)
_DOT: Final = re.compile(_DOT_SAID, re.I)
_COMMON_WORDS: Final = """
    a an the i me you he she it we they us him her them my your his our their this that
    is am are was were be been being look looked looking work works worked working stay
    stayed live lives lived meet met arrive arrived arriving available based found find
    here there home good great well back out up down off now just only even still also
    and or but so then when while where what who which one all some any each every
    best least most more less first last next early late time
"""
_NOT_A_NAME: Final = frozenset(_COMMON_WORDS.split())


def address(written: str) -> str:
    """The address a candidate spells (``bob [at] gmail [dot] com`` is
    ``bob@gmail.com``)."""
    return _DOT.sub(".", _AT.sub("@", written, count=1))


def obfuscated_emails(text: str, domain_ok: Callable[[str], bool]) -> list[Finding]:
    """Every obfuscated address in ``text`` whose spelled address ``domain_ok``
    accepts (the e-mail recognizer's check of a written address)."""
    candidates = [m for m in _CANDIDATE.finditer(text)
                  if m.group("local").lower() not in _NOT_A_NAME]

    def check(start: int, end: int) -> Finding | None:
        return Finding(start, end, Kind.EMAIL) if domain_ok(address(text[start:end])) else None

    return checked_each((m.span() for m in candidates), check, Kind.EMAIL)
