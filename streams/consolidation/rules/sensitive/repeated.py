"""Values said in a session, found again where a model repeats them in its own words.

A judge or summary model words facts its own way: "My password is Tr0ub4dor&3x"
may come back as "The user's wiki login is Tr0ub4dor&3x." — no pattern and no
stated-password phrase is left to find there, but the value is. :func:`said_values`
takes each value the detector found in the session's texts, of a kind the policy
does not keep, and :func:`repeated` finds them again in another text: literally
(an e-mail address in any case), and a value of a kind made of digits (card, IBAN,
phone, national id) with any separators or none between its characters
("4111 1111 1111 1111" as "4111111111111111"). Pure.

The work is bounded: at most :data:`MAX_VALUES` values per session, each of at
least :data:`MIN_CHARS` characters (shorter ones would be found everywhere). A
session with more distinct values than that gives ``None``: its model-worded
memories are then not kept at all (fail closed), its episodes are screened as
always.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from streams.consolidation.rules.sensitive.kinds import Finding, Kind
from streams.consolidation.rules.sensitive.policy import Action, Policy

MAX_VALUES: Final = 64
MIN_CHARS: Final = 4
_SPELLED: Final = frozenset({Kind.CARD, Kind.IBAN, Kind.PHONE, Kind.NATIONAL_ID})
_SEPARATORS: Final = r"[\s\-./()+]*"


@dataclass(frozen=True)
class Value:
    """One value found in the session, as a pattern that finds it again, and its kind."""

    pattern: re.Pattern[str]
    kind: Kind


def _pattern(value: str, kind: Kind) -> re.Pattern[str] | None:
    if kind in _SPELLED:
        chars = [c for c in value if c.isalnum()]
        if len(chars) < MIN_CHARS:
            return None
        return re.compile(r"(?<![^\W_])" + _SEPARATORS.join(re.escape(c) for c in chars)
                          + r"(?![^\W_])", re.I)
    value = value.strip()
    if len(value) < MIN_CHARS:
        return None
    return re.compile(re.escape(value), re.I if kind is Kind.EMAIL else 0)


def said_values(texts: Sequence[str], found: Sequence[Sequence[Finding]],
                policy: Policy) -> list[Value] | None:
    """The distinct values found in ``texts`` (``found[i]`` in ``texts[i]``) of the kinds
    ``policy`` masks or drops; None when there are more than :data:`MAX_VALUES`."""
    seen: dict[tuple[str, Kind], Value] = {}
    for text, findings in zip(texts, found, strict=True):
        for f in findings:
            if policy.action(f.kind) is Action.KEEP:
                continue
            key = (text[f.start:f.end], f.kind)
            if key in seen:
                continue
            pattern = _pattern(*key)
            if pattern is None:
                continue
            if len(seen) == MAX_VALUES:
                return None
            seen[key] = Value(pattern, f.kind)
    return list(seen.values())


def repeated(text: str, values: Sequence[Value]) -> list[Finding]:
    """Where ``text`` says one of ``values`` again, as findings of its kind."""
    return [Finding(m.start(), m.end(), v.kind) for v in values
            for m in v.pattern.finditer(text) if m.end() > m.start()]
