"""Values said in a session found again where a model repeats them in its own words:
literally, an e-mail in any case, a number with other separators or none; short or
kept values are not looked for; the number of values is bounded."""

from __future__ import annotations

import pytest

from streams.consolidation.rules.sensitive.kinds import Finding, Kind
from streams.consolidation.rules.sensitive.policy import DEFAULT_POLICY, Policy
from streams.consolidation.rules.sensitive.repeated import MAX_VALUES, repeated, said_values


def found_in(text: str, value: str, kind: Kind) -> Finding:
    at = text.index(value)
    return Finding(at, at + len(value), kind)


SAID = "My password is Tr0ub4dor&3x, card 4111 1111 1111 1111, mail Ann.Lee@Fastmail.com"
FOUND = [found_in(SAID, "Tr0ub4dor&3x", Kind.SECRET),
         found_in(SAID, "4111 1111 1111 1111", Kind.CARD),
         found_in(SAID, "Ann.Lee@Fastmail.com", Kind.EMAIL)]


@pytest.mark.parametrize(("text", "kinds"), [
    ("The user's wiki login is Tr0ub4dor&3x.", [Kind.SECRET]),
    ("Paid with 4111111111111111 yesterday", [Kind.CARD]),
    ("Paid with 4111-1111-1111-1111", [Kind.CARD]),
    ("Write to ann.lee@fastmail.com", [Kind.EMAIL]),
    ("Login tr0ub4dor&3x", []),  # a secret is case-sensitive
    ("Order 94111111111111111110", []),  # inside a longer number
    ("Nothing said again", []),
])
def test_a_value_said_is_found_again(text: str, kinds: list[Kind]) -> None:
    values = said_values([SAID], [FOUND], DEFAULT_POLICY)
    assert values is not None
    assert [f.kind for f in repeated(text, values)] == kinds


def test_kept_and_short_values_are_not_looked_for() -> None:
    text = "pin 123, email a@b.io"
    found = [found_in(text, "123", Kind.SECRET), found_in(text, "a@b.io", Kind.EMAIL)]
    keep_email = Policy.of({"email": "keep"})
    assert said_values([text], [found], keep_email) == []


def test_the_values_are_bounded() -> None:
    text = " ".join(f"key-{i:04d}-secret" for i in range(MAX_VALUES + 1))
    found = [found_in(text, f"key-{i:04d}-secret", Kind.SECRET) for i in range(MAX_VALUES + 1)]
    assert said_values([text], [found[:MAX_VALUES]], DEFAULT_POLICY) is not None
    assert said_values([text], [found], DEFAULT_POLICY) is None
