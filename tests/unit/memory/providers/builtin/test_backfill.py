"""Which stored features a backfill replaces: none, unreadable or older ones; never a
newer release's, one of a newer Python's Unicode version, or one this release reads."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from streams.memory.providers.builtin.backfill import _left, _values
from streams.memory.providers.builtin.row_features import (
    FEATURES_VERSION,
    UNICODE,
    derive,
    encode,
)

TEXT = "Alice: we switched the deadline to 14 May."
RIGHT = encode(derive(TEXT, "user"))


@pytest.mark.parametrize(("stored", "left"), [
    (None, False),
    ("", False),
    ("{not json", False),
    ("[1, 2]", False),
    (json.dumps({"v": "9"}), False),  # not an int: unreadable, replaced
    (json.dumps({"v": FEATURES_VERSION - 1}), False),
    (json.dumps({"v": FEATURES_VERSION, "u": "99.0.0"}), True),  # a newer Python's
    (json.dumps({"v": FEATURES_VERSION, "u": UNICODE + ".1"}), True),
    (json.dumps({"v": FEATURES_VERSION, "u": "0.0.0"}), False),  # an older Python's
    (json.dumps({"v": FEATURES_VERSION, "u": "14.0"}), False),
    (json.dumps({"v": FEATURES_VERSION, "u": "fifteen"}), False),
    (json.dumps({"v": FEATURES_VERSION, "u": UNICODE}), False),  # this one's, unreadable
    (json.dumps({"v": FEATURES_VERSION}), False),
    (json.dumps({"v": FEATURES_VERSION + 1}), True),
    (json.dumps({"v": True}), False),  # a bool is not a version
    ("[" * 100_000 + "]" * 100_000, False),  # too deep to parse: replaced, no crash
])
def test_which_values_are_left_as_they_are(stored: object, left: bool) -> None:
    assert _left(stored) is left


def test_the_updates_for_a_batch() -> None:
    rows = [SimpleNamespace(id=n, content=TEXT, role="user", features=f)
            for n, f in enumerate([None, RIGHT, "{bad", json.dumps({"v": FEATURES_VERSION + 1})])]
    values, newer = _values(rows)
    assert newer == 1
    assert values == [{"b_id": 0, "b_old": None, "b_new": RIGHT},
                      {"b_id": 2, "b_old": "{bad", "b_new": RIGHT}]
