"""Which stored features a backfill replaces: none, unreadable or older ones; never a
newer release's or one this release reads."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from streams.memory.providers.builtin.backfill import _newer, _values
from streams.memory.providers.builtin.row_features import FEATURES_VERSION, derive, encode

TEXT = "Alice: we switched the deadline to 14 May."
RIGHT = encode(derive(TEXT, "user"))


@pytest.mark.parametrize(("stored", "newer"), [
    (None, False),
    ("", False),
    ("{not json", False),
    ("[1, 2]", False),
    (json.dumps({"v": "9"}), False),  # not an int: unreadable, replaced
    (json.dumps({"v": FEATURES_VERSION - 1}), False),
    (json.dumps({"v": FEATURES_VERSION, "u": "0.0.0"}), False),  # another Unicode: replaced
    (json.dumps({"v": FEATURES_VERSION + 1}), True),
    (json.dumps({"v": True}), False),  # a bool is not a version
])
def test_what_counts_as_a_newer_release_s_value(stored: object, newer: bool) -> None:
    assert _newer(stored) is newer


def test_the_updates_for_a_batch() -> None:
    rows = [SimpleNamespace(id=n, content=TEXT, role="user", features=f)
            for n, f in enumerate([None, RIGHT, "{bad", json.dumps({"v": FEATURES_VERSION + 1})])]
    values, newer = _values(rows)
    assert newer == 1
    assert values == [{"b_id": 0, "b_old": None, "b_new": RIGHT},
                      {"b_id": 2, "b_old": "{bad", "b_new": RIGHT}]
