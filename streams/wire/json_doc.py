"""One JSON object from raw Kafka bytes, refusing what no sink can take.

:func:`load_object` is the first step of every decoder (chat events, idle
checks, session ends, memory queries). It never raises: it returns the parsed
object or a :class:`~streams.wire.rejections.Rejected`, checked in this
order (each input gets exactly one reason):

``undecodable``
    no value, bytes that are not UTF-8, text that is not JSON (``NaN``,
    ``Infinity`` and numbers that overflow a double are not JSON numbers;
    integers of more than 4,300 digits are refused by Python), or JSON that is
    not an object;
``too_deep``
    arrays and objects nested deeper than ``max_depth`` (the object itself is
    level 1). Python's parser would give up near 1,000 levels with a
    ``RecursionError``; the explicit limit is far below, and the serialisers
    downstream (the database row, the cache) never meet a document they cannot
    write;
``invalid_text``
    a string (a key or a value, at any depth) holding a lone UTF-16 surrogate
    such as ``"\\ud800"``: valid JSON, but not Unicode text, so neither MySQL,
    SQLite nor Redis can store it. Surrogate *pairs* are fine.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final

from streams.wire.rejections import INVALID_TEXT, TOO_DEEP, UNDECODABLE, Rejected

MAX_DEPTH: Final = 64
"""Deepest nesting of arrays and objects accepted (the document itself is level 1)."""

# a lone surrogate can only come from a \u escape (the bytes are strict UTF-8)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} does not fit a double")
    return value


_decoder = json.JSONDecoder(parse_constant=_no_constant, parse_float=_finite)


def load_object(raw: bytes | None, *, max_depth: int = MAX_DEPTH) -> dict[str, Any] | Rejected:
    """The JSON object ``raw`` holds, or why it was refused (see the module docstring)."""
    if raw is None:
        return Rejected(UNDECODABLE, "EmptyValue", "the record has no value")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Rejected(UNDECODABLE, "UnicodeDecodeError",
                        f"value is not UTF-8: {exc.reason} at byte {exc.start}")
    try:
        doc = _decoder.decode(text)
    except RecursionError:
        return _too_deep(max_depth)
    except ValueError as exc:
        return Rejected(UNDECODABLE, type(exc).__name__, f"value is not JSON: {exc}")
    if not isinstance(doc, dict):
        return Rejected(
            UNDECODABLE, "NotAnObject", f"value is JSON {type(doc).__name__}, not an object"
        )
    surrogates = _SURROGATE_ESCAPE.search(raw) is not None
    if not surrogates and raw.count(b"[") + raw.count(b"{") <= max_depth:
        return doc  # too few brackets to nest too deep: no walk needed
    return _check_tree(doc, max_depth, surrogates=surrogates)


def _too_deep(max_depth: int) -> Rejected:
    return Rejected(TOO_DEEP, "TooDeep", f"JSON nested deeper than {max_depth} levels")


def _check_tree(doc: dict[str, Any], max_depth: int, *,
                surrogates: bool) -> dict[str, Any] | Rejected:
    """Walk ``doc`` without recursion: its depth, and (when the bytes hold an
    escape that may be one) lone surrogates in its strings."""
    bad_field: str | None = None
    stack: list[tuple[Any, int, str]] = [(doc, 1, "")]
    while stack:
        node, depth, field = stack.pop()
        if depth > max_depth:
            return _too_deep(max_depth)
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            where = field or str(key)
            if surrogates and bad_field is None and (_lone(key) or _lone(value)):
                bad_field = where
            if isinstance(value, dict | list):
                stack.append((value, depth + 1, where))
    if bad_field is not None:
        return Rejected(INVALID_TEXT, "LoneSurrogate",
                        f"field {bad_field!a} holds a lone UTF-16 surrogate")
    return doc


def _lone(value: object) -> bool:
    return isinstance(value, str) and not value.isascii() and _SURROGATE.search(value) is not None
