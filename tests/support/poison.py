"""Hypothesis strategies for poison input: arbitrary bytes, arbitrary JSON
documents, and valid chat events with mutated fields (lone surrogates, huge and
deeply nested values, extreme dates, wrong types, non-finite numbers).

Valid events carry the event id :data:`ID` (a placeholder a test replaces to
make ids unique); a mutation may replace it too.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from hypothesis import strategies as st

ID = "@@ID@@"
SAFE = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=10)
# every code point, lone surrogates included
ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=20)
FIELDS = ("event_id", "type", "tenant_id", "user_id", "agent_id", "conversation_id", "role",
          "content", "name", "tool_calls", "tool_call_id", "parent_conversation_id",
          "created_at", "reason", "some_extra_field")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
    max_leaves=12,
)


def to_bytes(value: Any, ascii_only: bool) -> bytes:
    """JSON as a producer might write it: with ``ascii_only`` lone surrogates become
    ``\\ud800`` escapes, without they become (invalid) CESU-8 bytes."""
    text = json.dumps(value, ensure_ascii=ascii_only, allow_nan=True)
    return text.encode("utf-8", "surrogatepass")


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def rfc3339(dt: datetime, offset_minutes: int, fraction: bool) -> str:
    sign = "-" if offset_minutes < 0 else "+"
    hours, minutes = divmod(abs(offset_minutes), 60)
    frac = f".{dt.microsecond:06d}" if fraction else ""
    return (f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:"
            f"{dt.second:02d}{frac}{sign}{hours:02d}:{minutes:02d}")


dates = st.builds(
    rfc3339,
    st.one_of(
        st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59)),
        st.datetimes(min_value=datetime(999, 12, 30), max_value=datetime(1000, 1, 2)),
        st.datetimes(min_value=datetime(9999, 12, 30), max_value=datetime(9999, 12, 31, 23, 59)),
    ),
    st.integers(-1439, 1439),
    st.booleans(),
) | st.sampled_from([
    "9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00", "0000-01-01T00:00:00Z",
    "9999-12-31T24:00:00Z", "2026-02-30T00:00:00Z", "2026-11-30T08:00:00", "1000-01-01 00:00:00Z",
])
lone_surrogates = st.builds(lambda a, cp, b: a + chr(cp) + b,
                            st.text(max_size=4), st.integers(0xD800, 0xDFFF), st.text(max_size=4))
# sizes around the limits: ids 128/255, tool_calls 65,535 bytes, content 65,536 bytes
sizes = st.sampled_from([0, 64, 65, 128, 129, 255, 256, 65_500, 65_535, 65_536, 70_000])
big_texts = st.builds(lambda ch, n: ch * n, st.sampled_from(["x", "é", "😀", "\x00"]), sizes)
big_tool_calls = sizes.map(lambda n: [{"id": "c", "arguments": "x" * max(0, n - 32)}])

# poison values, as raw JSON text
poison_values = st.one_of(
    lone_surrogates.map(json.dumps),
    st.integers(1, 1500).map(nested),
    st.builds(lambda d, inner: "[" * d + inner + "]" * d, st.integers(1, 80),
              st.sampled_from(['{"a": 1}', '"x"', "1"])),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "9" * 5000, "null",
                     "true", "0", "-1", "[]", "{}", '""', '"agent:"', "1.5", '"message"']),
    big_texts.map(lambda s: json.dumps(s, ensure_ascii=False)),
    big_tool_calls.map(json.dumps),
    dates.map(json.dumps),
    json_values.map(lambda v: json.dumps(v, allow_nan=True)),
)


def valid_event(kind: str, role: str, content: str, name: str | None,
                tool_calls: list[dict[str, str]] | None, created_at: str,
                ids: str) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "event_id": ID, "type": kind, "tenant_id": "t1", "user_id": f"u-{ids}",
        "agent_id": "a1", "conversation_id": f"c-{ids}", "created_at": created_at,
    }
    if kind == "message":
        doc.update(role=role, content=content)
        if name is not None:
            doc["name"] = name
        if tool_calls:
            doc["tool_calls"] = tool_calls
    return doc


valid_events = st.builds(
    valid_event,
    kind=st.sampled_from(["message", "message", "message", "session_end"]),
    role=st.sampled_from(["user", "assistant", "system", "tool"]),
    content=st.text(max_size=40),
    name=st.none() | SAFE,
    tool_calls=st.none() | st.lists(st.dictionaries(SAFE, st.text(max_size=8), max_size=2),
                                    max_size=2),
    created_at=st.sampled_from(["2026-11-30T08:00:00Z", "2026-11-30T09:00:00.5+01:00",
                                "1000-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z"]),
    ids=SAFE,
)


def mutate(doc: dict[str, Any], changes: list[tuple[str, str | None]]) -> bytes:
    """``doc`` with each (field, raw JSON text) change applied; None deletes the field."""
    out, raws = dict(doc), {}
    for n, (name, raw) in enumerate(changes):
        if raw is None:
            out.pop(name, None)
        else:
            out[name] = f"@@P{n}@@"
            raws[f'"@@P{n}@@"'] = raw
    text = json.dumps(out, ensure_ascii=False)
    for placeholder, raw in raws.items():
        text = text.replace(placeholder, raw)
    return text.encode("utf-8", "surrogatepass")


def corrupt(value: bytes, at: int, junk: bytes) -> bytes:
    """``value`` with ``junk`` written over it at ``at`` (modulo its length)."""
    i = at % (len(value) + 1)
    return value[:i] + junk + value[i + len(junk):]


# each field with the poison that suits it
texts = st.one_of(big_texts.map(lambda s: json.dumps(s, ensure_ascii=False)),
                  lone_surrogates.map(json.dumps))  # as \ud800 escapes
targeted = st.one_of(
    st.tuples(st.just("created_at"), dates.map(json.dumps)),
    st.tuples(st.just("content"), texts),
    st.tuples(st.just("tool_calls"), st.one_of(
        big_tool_calls.map(json.dumps),
        st.integers(1, 1500).map(lambda d: '[{"a": ' + nested(d) + "}]"),
        st.sampled_from(['[{"a": NaN}]', '[{"a": 1e999}]', '[{"\\ud800": 1}]', "[1]", '"x"']),
    )),
    st.tuples(st.sampled_from(["event_id", "tenant_id", "user_id", "agent_id", "conversation_id",
                               "name", "tool_call_id", "parent_conversation_id", "reason"]),
              texts),
)
mutated_events = st.builds(
    mutate, valid_events,
    st.lists(targeted | st.tuples(st.sampled_from(FIELDS), st.none() | poison_values),
             min_size=1, max_size=2),
)
poison_records = st.one_of(
    st.binary(max_size=200),
    st.builds(to_bytes, json_values, st.booleans()),
    st.builds(to_bytes, st.dictionaries(ANY_TEXT, json_values, max_size=6), st.booleans()),
    mutated_events,
    mutated_events,  # the most interesting: twice as likely
    st.builds(corrupt, valid_events.map(lambda d: json.dumps(d).encode()),
              st.integers(0, 400), st.binary(min_size=1, max_size=4)),
)
