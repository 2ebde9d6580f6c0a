"""What a worker derives from a memory's text to hold it, derived once when it is written.

Holding a memory (:class:`~.scope_state.ScopeState`) needs its speaker, whether
it is a standing instruction, whether it announces a change and the values it
states, its word set (MMR without an embedder) and its index terms (BM25). Each
is a pass of a regular expression over the whole text: for a long answer with
code about a millisecond, paid again by every worker that loads the scope and by
every delta it applies. So they are derived when the memory is written and
stored with it (``memory.features``, 0022); a reader decodes them instead.

A stored value carries :data:`FEATURES_VERSION` and the Unicode version of the
writer's Python (the patterns' word classes and case folding follow it). A row with
none (written before 0022), with another version, or with one that does not decode
as the writer writes it is derived from its text as before, so a reader never
depends on what a writer of another release stored. Change what any rule this
module calls derives and bump the version:
``tests/unit/memory/providers/builtin/test_row_features.py`` pins the version to the
source of every function, pattern and word list :func:`derive` reaches, and fails at
any change of them until one decides (bump, or re-pin a change that derives the
same).
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from typing import Any

from streams.adapters.db.schema.memory import TERM_MAX_CHARS
from streams.memory.rules.fusion import speaker_of
from streams.memory.rules.instructions import standing_instruction
from streams.memory.rules.lexical import term_counts, tokenize
from streams.memory.rules.mmr import token_set
from streams.memory.rules.recency import announces_change, value_signature

FEATURES_VERSION = 1
HEAD_CHARS = 80  # enough of a memory's text to find its speaker
SUBJECT = "§"  # subject terms start so (streams/consolidation/rules/subjects.py); never a word
_VALUE_MAX = 2**32  # value_signature: a CRC-32 and one
_COUNT_MAX = 2**31  # a term's count in one memory (its text is far shorter)
UNICODE = unicodedata.unidata_version  # the one the patterns' classes follow (\w, casefold)
_VERSION = (FEATURES_VERSION, UNICODE)


@dataclass(frozen=True)
class RowFeatures:
    """What holding one memory needs of its text."""

    speaker: str | None
    instruction: bool  # a user's standing instruction (never an assistant's words)
    changed: bool  # :func:`~streams.memory.rules.recency.announces_change`
    value: int  # :func:`~streams.memory.rules.recency.value_signature`
    words: frozenset[str]  # :func:`~streams.memory.rules.mmr.token_set`
    terms: dict[str, int]  # index terms (cut to the column's width) and their counts


def derive(content: str, role: str | None) -> RowFeatures:
    """The features of a memory's text, computed."""
    return RowFeatures(
        speaker=speaker_of(content[:HEAD_CHARS]),
        instruction=role != "assistant" and standing_instruction(content),
        changed=announces_change(content),
        value=value_signature(content),
        words=token_set(content),
        terms=term_counts(t[:TERM_MAX_CHARS] for t in tokenize(content)),
    )


def encode(f: RowFeatures) -> str:
    """The stored form: compact JSON, words space-separated (no word holds a space)."""
    return json.dumps({"v": _VERSION[0], "u": _VERSION[1], "s": f.speaker,
                       "i": int(f.instruction), "c": int(f.changed), "g": f.value,
                       "w": " ".join(sorted(f.words)), "t": f.terms},
                      ensure_ascii=False, separators=(",", ":"))


def decode(stored: object) -> RowFeatures | None:
    """The features stored, or None when there are none this release can read: any
    value not exactly as :func:`encode` writes it (types, ranges, terms) is not read."""
    if not isinstance(stored, str) or not stored:
        return None
    try:
        d: Any = json.loads(stored)
        if type(d) is not dict or type(d.get("v")) is not int \
                or (d["v"], d.get("u")) != _VERSION:
            return None
        speaker, flags, value, words, terms = d["s"], (d["i"], d["c"]), d["g"], d["w"], d["t"]
        if not (speaker is None or (type(speaker) is str and 0 < len(speaker) <= HEAD_CHARS)) \
                or type(words) is not str \
                or any(f not in (0, 1) or type(f) is not int for f in flags) \
                or type(value) is not int or not 0 <= value <= _VALUE_MAX \
                or type(terms) is not dict or not all(_term(t, n) for t, n in terms.items()):
            return None
        return RowFeatures(speaker=speaker, instruction=bool(flags[0]),
                           changed=bool(flags[1]), value=value,
                           words=frozenset(words.split()), terms=terms)
    except Exception:  # whatever is stored, the text is there to derive from
        return None


def _term(term: object, count: object) -> bool:
    return (type(count) is int and 1 <= count <= _COUNT_MAX and type(term) is str
            and 0 < len(term) <= TERM_MAX_CHARS and not term.startswith(SUBJECT))


def features_of(row: Any) -> RowFeatures:
    """A ``memory`` row's features: as stored, else derived from its text and role."""
    return decode(getattr(row, "features", None)) or derive(row.content, row.role)
