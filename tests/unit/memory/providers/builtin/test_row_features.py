"""A memory's features: derived as the rules say, stored and read back unchanged, and
derived again from the text whenever what is stored cannot be read by this release."""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import re
import types
import unicodedata
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.memory.providers.builtin.row_features import (
    FEATURES_VERSION,
    RowFeatures,
    decode,
    derive,
    encode,
    features_of,
)
from streams.memory.providers.builtin.scope_state import ScopeState

LONG_ANSWER = ("Here is how you could restructure it:\n```python\ndef total(xs):\n"
               "    return sum(x * 2 for x in xs)\n```\n" + "The loader reads each part. " * 40)
CORPUS = [
    "Alice: I moved to Lisbon in March 2023.",
    "From now on, answer in Spanish.",
    "We switched the deadline to 14 May; latency is now averaging around 250 ms.",
    "assistant: Sure! 1. Preheat the oven to 200 °C 2. Bake for 25 minutes.",
    "订单已发货，我们明天见。 Café au lait, naïve résumé.",
    "snake_case words_and CamelCase v2.1.0 x86_64",
    LONG_ANSWER,
    "   ",
]


@pytest.mark.parametrize(("text", "role", "expect"), [
    ("Alice: I moved to Lisbon in March 2023.", "user",
     {"speaker": "Alice", "instruction": False}),
    ("From now on, answer in Spanish.", "user", {"instruction": True}),
    ("From now on, answer in Spanish.", None, {"instruction": True}),
    ("From now on, answer in Spanish.", "assistant", {"instruction": False}),
    ("We switched the deadline to 14 May.", "user", {"changed": True}),
    ("The deadline is 14 May.", "user", {"changed": False}),
    ("Bake for 25 minutes.", None, {"speaker": None}),
])
def test_derived_as_the_rules_say(text: str, role: str | None, expect: dict[str, Any]) -> None:
    f = derive(text, role)
    assert {k: getattr(f, k) for k in expect} == expect


def test_the_value_and_the_words_and_terms_of_a_text() -> None:
    f = derive("Latency is now 250 ms, latency down.", "user")
    assert f.value != 0 and f.value == derive("It was 250 ms", None).value
    assert {"latency", "is", "now", "250", "ms", "down"} <= f.words
    assert sum(f.terms.values()) >= 4 and max(f.terms.values()) == 2
    assert derive("no values here", None).value == 0


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400), st.sampled_from([None, "user", "assistant"]))
def test_what_is_stored_reads_back_as_derived(text: str, role: str | None) -> None:
    f = derive(text, role)
    assert decode(encode(f)) == f


GOOD: dict[str, Any] = {"u": unicodedata.unidata_version, "s": None, "i": 0, "c": 1,
                        "g": 2**32, "w": "a b", "t": {"a": 2}}


def test_a_value_as_encode_writes_it_is_read() -> None:
    assert decode(json.dumps({"v": FEATURES_VERSION, **GOOD})) == RowFeatures(
        None, False, True, 2**32, frozenset({"a", "b"}), {"a": 2})


@pytest.mark.parametrize("stored", [
    None, "", "not json", "[1, 2]", '{"v": 0}', "{}",
    encode(derive("Alice: hi", None)).replace(f'"v":{FEATURES_VERSION}', '"v":999'),
    *(json.dumps({"v": FEATURES_VERSION, **GOOD, **fields}) for fields in [
        {"s": 5}, {"s": ""}, {"s": "x" * 81}, {"u": "1.0.0"}, {"u": None}, {"v": True},
        {"v": 1.0}, {"t": {"a": 2**31 + 1}}, {"t": {"a": 10**400}},
        {"g": "x"}, {"g": "123"}, {"g": 3.7}, {"g": True}, {"g": -1}, {"g": 2**70},
        {"g": float("inf")}, {"i": "0"}, {"i": 2}, {"c": True}, {"w": ["a"]}, {"t": []},
        {"t": {"a": "x"}}, {"t": {"a": [1]}}, {"t": {"a": -5}}, {"t": {"a": 0}},
        {"t": {"a": 1.0}}, {"t": {"§x": 1}}, {"t": {"": 1}}, {"t": {"x" * 65: 1}},
    ]),
    json.dumps({"v": FEATURES_VERSION, **{k: v for k, v in GOOD.items() if k != "t"}}),
    json.dumps({"v": FEATURES_VERSION, "g": 10**400}),
])
def test_what_cannot_be_read_is_derived_from_the_text(stored: object) -> None:
    assert decode(stored) is None
    row = SimpleNamespace(content="Alice: we switched to 250 ms", role="user", features=stored)
    assert features_of(row) == derive(row.content, "user")


def test_a_row_without_the_column_is_derived_from_its_text() -> None:
    row = SimpleNamespace(content="Alice: hi there", role=None)
    assert features_of(row) == derive("Alice: hi there", None)


def test_stored_features_are_used_as_stored() -> None:
    told = RowFeatures("Bob", True, True, 7, frozenset({"x"}), {"y": 2})
    row = SimpleNamespace(content="Alice: hi", role="assistant", features=encode(told))
    assert features_of(row) == told


def _reached(obj: object, seen: set[int], out: list[str], names: set[str] | None = None,
             ) -> None:
    """The source of ``obj`` and of everything of this project it reaches: the functions
    it calls (directly, through a module, through a memo or a wrapper, as a default
    argument), the patterns, word lists and values they read. ``names``: of a module,
    only those the caller uses."""
    if isinstance(obj, types.ModuleType):
        if obj.__name__.startswith("streams."):
            for name in sorted(names or ()):
                if name in vars(obj):
                    _reached(vars(obj)[name], seen, out)
        return
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, functools.partial):
        for part in (obj.func, *obj.args, *obj.keywords.values()):
            _reached(part, seen, out)
    elif isinstance(obj, re.Pattern):
        out.append(f"pattern {obj.pattern!r} {obj.flags}")
    elif isinstance(obj, (frozenset, set)):
        out.append(f"set {sorted(map(repr, obj))}")
    elif isinstance(obj, (str, bytes, int, float, tuple, list, dict)):
        out.append(f"value {obj!r}")
    elif inspect.isfunction(obj):
        if not obj.__module__.startswith("streams."):
            return
        out.append(inspect.getsource(obj))
        used: set[str] = set()
        codes = [obj.__code__]
        while codes:
            code = codes.pop()
            used.update(code.co_names)
            codes += [c for c in code.co_consts if inspect.iscode(c)]
        for default in (*(obj.__defaults__ or ()), *(obj.__kwdefaults__ or {}).values()):
            _reached(default, seen, out)
        for cell in obj.__closure__ or ():
            _reached(cell.cell_contents, seen, out)
        for name in sorted(used):
            if name in obj.__globals__:
                _reached(obj.__globals__[name], seen, out, used)
    elif (inner := getattr(obj, "__wrapped__", None) or getattr(obj, "compute", None)) \
            is not None:
        out.append(f"wrapped by {type(obj).__qualname__}")
        _reached(inner, seen, out)  # an lru_cache, a Memo: its function
    elif type(obj).__module__.startswith("streams.") and not inspect.isclass(obj):
        raise AssertionError(f"derive reaches {obj!r}, which this walk cannot pin: teach it")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def test_the_version_changes_with_the_rules() -> None:
    """The version stored with the features, pinned to the source of every function,
    pattern and word list :func:`derive` reaches, and to what it derives from a corpus.
    Either changes with any rule: if the change alters what is derived, bump
    ``FEATURES_VERSION`` (rows stored under the old one are then derived again from
    their text); if it does not (a comment, a rename), re-pin without a bump."""
    reached: list[str] = []
    _reached(derive, set(), reached)
    assert len(reached) > 20 and any("def value_signature" in r for r in reached)
    corpus = "\n".join(encode(derive(t, r)) for t in CORPUS for r in (None, "user", "assistant"))
    assert (FEATURES_VERSION, _digest("\n".join(reached)), _digest(corpus)) == PINNED, (
        "a rule derive reaches changed (see this test's docstring)")
    assert unicodedata.unidata_version in encode(derive("a", None))  # stored with the value


PINNED = (1, "f90fbadb4369deee", "ef1113dba44f15bb")


def _rows(features: bool) -> list[SimpleNamespace]:
    out = []
    for i, text in enumerate(CORPUS[:-1], start=1):
        role = "assistant" if i % 2 else "user"
        out.append(SimpleNamespace(
            id=i, session_key="s", seq=i, content=text, type="event",
            kind="episode" if i % 3 else "fact", source_event_ids=f'["e{i}"]', role=role,
            event_time=datetime(2026, 1, i), doc_len=sum(derive(text, role).terms.values()),
            features=encode(derive(text, role)) if features else None))
    return out


def test_a_scope_holds_the_same_from_stored_features_as_from_the_text() -> None:
    a, b = ScopeState(1, 1, 7, 0, 0), ScopeState(1, 1, 7, 0, 0)
    a.add_rows(_rows(features=True))  # type: ignore[arg-type]
    b.add_rows(_rows(features=False))  # type: ignore[arg-type]
    assert a.positions == b.positions and a.episodes == b.episodes and a.slots == b.slots
    assert a.terms.keys() == b.terms.keys() and a.postings == b.postings
    for term, (ids, tf, dl) in a.terms.items():
        assert np.array_equal(ids, b.terms[term][0]) and np.array_equal(tf, b.terms[term][1])
        assert np.array_equal(dl, b.terms[term][2])
    n = np.arange(len(a.places))
    assert a.places.words_of(n).tolist() == b.places.words_of(n).tolist()
