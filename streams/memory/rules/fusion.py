"""Score fusion for hybrid retrieval: one query, many candidate memories.

The pipeline, every step array work over the candidates (:func:`fuse_arrays`;
:func:`fuse` is the same on ``{memory id: score}`` dicts), with the weights of
:class:`FusionWeights` (chosen by leave-one-conversation-out
rotation on LoCoMo, ``make bench-rotation``):

1. each signal goes on 0..1 for this query, best hit = 1: BM25 divided by its
   best score (0 means no match, so a weak match keeps its share of the best:
   with min-max the weakest of a few matches would score 0 however good it
   is), cosine by min-max (unrelated texts do not score 0);
2. with ``limit``, only each signal's best ``limit`` and their session
   neighbours go on;
3. the signals are mixed: ``0.6 * dense + 0.4 * lexical`` when a dense signal
   exists, the lexical one alone otherwise; an episode made from an assistant's
   message counts ``0.05`` times its mix (the user's own words weigh more in a
   memory of the user than what was said to them), unless the query asks what
   the assistant said (:func:`about_assistant`);
4. neighbour smoothing adds ``0.5 *`` the better score of the previous and the
   next message of the same session: an answer is often the reply to the
   message that matched the words of the question;
5. the session boost adds ``0.5 *`` the best score within the memory's
   session: a session about the topic is a good place to look;
6. the person prior adds ``0.25`` to memories by a person the question names
   ("What did Caroline paint?", :func:`named_people`);
7. of the passages of one message (a long answer cut into parts), the best
   keeps its score and the k-th next is multiplied by ``0.3 ** k``;
8. the best of the user's standing instructions (:mod:`.instructions`: "Always
   include version numbers when I ask about dependencies") scoring at least
   ``0.2`` of the best memory is lifted to the best's score: the request falls
   under it, and the answer must follow it whatever else the reply holds (one
   only: a cube's instructions share the topic of its chat, and the others
   keep their rank);
9. everything is rescaled so the best memory scores the cube's confidence
   (:func:`confidence`, 1.0 when it surely holds what is asked; a cube whose
   best match is weak in absolute terms scores low as a whole, so its only
   hit is not promoted to 1.0).

Every step is elementwise float64 arithmetic in a fixed order, so the scores
are the same, bit for bit, whichever way the candidates are given.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

Scores = dict[str, float]
Ids = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Flags = npt.NDArray[np.bool_]
SEQ_LIMIT = 1 << 31  # seq is a 32-bit integer (the column's type)
SEQ_OFFSET = 1 << 32  # a slot's key: the session's code above 34 bits, seq + 2**32 below


class Position(NamedTuple):
    """Where a memory sits: its session (None for a standalone fact), order in it, speaker,
    the message it is a passage of (None: a memory of its own), and whether it was made
    from an assistant's message."""

    session: str | None
    seq: int
    speaker: str | None = None
    source: str | None = None
    assistant: bool = False
    instruction: bool = False


@dataclass(frozen=True)
class FusionWeights:
    """The weights of :func:`fuse`; the defaults are the ones the rotation over LoCoMo and
    BEAM chose (``bench/rotation_joint.py``; docs/benchmarks.md, *Rotation*). The
    passages' decay made no measured difference between 0.05 and 0.3 and keeps the
    milder 0.3."""

    dense: float = 0.6
    lexical: float = 0.4
    neighbour: float = 0.5
    session: float = 0.5
    person: float = 0.25
    passage_decay: float = 0.3  # the k-th next passage of one message: times this ** k
    assistant: float = 0.05  # an assistant's episode's mixed signal: times this
    instruction: float | None = 0.2  # the best standing instruction at least this share of
    # the best memory is lifted to the top (None: never)


_SPEAKER = re.compile(r"^\s*([^\W\d_][\w .'’-]{0,60}?)\s*:\s")


def speaker_of(content: str) -> str | None:
    """The speaker of an episodic memory written as ``"Name: text"``, if any."""
    m = _SPEAKER.match(content)
    return m.group(1) if m else None


@dataclass(frozen=True)
class Places:
    """Where candidate memories sit, as arrays on ``ids`` (ascending, distinct): the
    code of the session (-1: a standalone memory), the order in it (a 32-bit int),
    the code of the speaker (-1: none), ``speakers[code]`` its name, the code of
    the message a passage is part of (-1: a memory of its own) and whether it was
    made from an assistant's message (``source`` and ``assistant`` may be empty:
    none is). A memory not among ``ids`` has no place (it is treated as
    standalone)."""

    ids: Ids
    session: Ids
    seq: Ids
    speaker: Ids
    speakers: Sequence[str]
    source: Ids = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    assistant: Flags = field(default_factory=lambda: np.zeros(0, dtype=bool))
    instruction: Flags = field(default_factory=lambda: np.zeros(0, dtype=bool))

    def assistants(self, at: Ids) -> Flags:
        """Whether each row ``at`` was made from an assistant's message (-1: no place)."""
        return _flags(self.assistant, at)

    def instructions(self, at: Ids) -> Flags:
        """Whether each row ``at`` is a user's standing instruction (-1: no place;
        :func:`~.instructions.standing_instruction`)."""
        return _flags(self.instruction, at)

    def sources(self, at: Ids) -> Ids:
        """The source code of each row ``at`` (-1: no place, or none)."""
        if not len(self.source):
            return np.full(len(at), -1, dtype=np.int64)
        return np.where(at >= 0, self.source[at], -1)

    def index(self, ids: Ids) -> Ids:
        """Each id's row, -1 for an id that has no place."""
        return rows_of(self.ids, ids)

    def slots(self, at: Ids) -> tuple[Ids, Ids, Flags]:
        """Of the rows ``at`` (-1: no place): each one's session (-1: none), slot key
        (session and order in one integer; the previous message of its session is
        key - 1), and whether it has a slot."""
        if not len(self.ids):
            none = np.full(len(at), -1, dtype=np.int64)
            return none, np.zeros(len(at), dtype=np.int64), np.zeros(len(at), dtype=bool)
        sessions = np.where(at >= 0, self.session[at], -1)
        has = sessions >= 0
        keys = np.where(has, (sessions << 34) | (self.seq[at] + SEQ_OFFSET), 0)
        return sessions, keys, has


def _flags(flags: Flags, at: Ids) -> Flags:
    """``flags`` of the rows ``at`` (-1, or no flags at all: False)."""
    if not len(flags):
        return np.zeros(len(at), dtype=bool)
    return np.where(at >= 0, flags[np.maximum(at, 0)], False)


def rows_of(keys: Ids, wanted: Ids) -> Ids:
    """The row of each wanted key among ``keys`` (ascending), -1 if absent."""
    if not len(keys):
        return np.full(len(wanted), -1, dtype=np.int64)
    at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    return np.where(keys[at] == wanted, at, -1)


def _member(keys: Ids, wanted: Ids) -> Flags:
    """Whether each wanted key is among ``keys`` (ascending)."""
    return rows_of(keys, wanted) >= 0


_ABOUT_ASSISTANT = re.compile(
    r"\b(?:did|have|had|'d)\s+(?:you|the\s+assistant)\s+(?:\w+\s+)?(?:suggest|recommend|say"
    r"|tell|mention|explain|show|give|propose|advise|write|share|provide|outline|list)\b"
    r"|\bwhat'd\s+you\b"
    r"|\b(?:was|were)\s+(?:\w+\s+)?(?:recommended|suggested|proposed|advised)\b"
    r"|\bthe\s+assistant\s+(?:suggested|recommended|said|told|mentioned|explained|showed"
    r"|gave|proposed|advised|wrote|shared|provided|outlined|listed)\b"
    r"|\byou\s+(?:suggested|recommended|said|told|mentioned|explained|showed|gave|proposed"
    r"|advised|wrote|shared|provided|outlined|listed)\b"
    r"|\byour\s+(?:suggestion|recommendation|advice|answer|explanation|example|code|plan"
    r"|proposal|outline)s?\b",
    re.I)


def about_assistant(query: str) -> bool:
    """Whether the query asks what the assistant said ("What did you suggest …", "your
    recommendation"): its answers are then what is looked for, and weigh in full."""
    return _ABOUT_ASSISTANT.search(query) is not None


def named_people(query: str, speakers: Collection[str]) -> set[str]:
    """The speakers (case-folded) whose name, or first name, the query mentions."""
    words = set(re.findall(r"[^\W_]+", query.casefold()))
    out: set[str] = set()
    for s in speakers:
        parts = s.casefold().split()
        if parts and (parts[0] in words or s.casefold() in query.casefold()):
            out.add(s.casefold())
    return out


def _top(values: Floats, n: int) -> Ids:
    """The rows of the ``n`` best values, ties in their order (all when ``n`` covers them)."""
    if len(values) <= n:
        return np.arange(len(values))
    return np.argsort(-values, kind="stable")[:max(n, 0)]


def _max_scaled(values: Floats) -> Floats:
    hi = float(values.max()) if len(values) else 0.0
    return values / hi if hi > 0 else values


def _min_max(values: Floats) -> Floats:
    lo, hi = float(values.min()), float(values.max())
    if hi - lo <= 1e-12:
        return np.ones(len(values), dtype=np.float64)
    return (values - lo) / (hi - lo)


def _lookup(keys: Ids, values: Floats, wanted: Ids) -> Floats:
    """The value of each wanted key among ``keys`` (ascending, distinct), 0.0 if absent."""
    at = rows_of(keys, wanted)
    return np.where(at >= 0, values[at], 0.0) if len(keys) else np.zeros(len(wanted))


def _last_by_key(keys: Ids, values: Floats) -> tuple[Ids, Floats]:
    """Distinct keys ascending, each with the value of its last occurrence."""
    order = np.argsort(keys, kind="stable")
    keys, values = keys[order], values[order]
    last = np.ones(len(keys), dtype=bool)
    last[:-1] = keys[1:] != keys[:-1]
    return keys[last], values[last]


def _smooth_neighbours(values: Floats, keys: Ids, has: Flags, weight: float) -> Floats:
    rows = np.flatnonzero(has)
    if not len(rows):
        return values
    slot_keys, slot_values = _last_by_key(keys[rows], values[rows])
    prev = _lookup(slot_keys, slot_values, keys[rows] - 1)
    nxt = _lookup(slot_keys, slot_values, keys[rows] + 1)
    out = values.copy()
    out[rows] = values[rows] + weight * np.maximum(prev, nxt)
    return out


def _session_boost(values: Floats, sessions: Ids, weight: float) -> Floats:
    """Each memory of a session plus ``weight *`` the session's best score, where that
    best is above 0 (``sessions``: -1 for a standalone memory)."""
    rows = np.flatnonzero(sessions >= 0)
    if not len(rows):
        return values
    order = np.argsort(sessions[rows], kind="stable")
    codes = sessions[rows][order]
    first = np.ones(len(codes), dtype=bool)
    first[1:] = codes[1:] != codes[:-1]
    best = np.maximum.reduceat(values[rows][order], np.flatnonzero(first))
    mine = np.empty(len(rows), dtype=np.float64)
    mine[order] = best[np.cumsum(first) - 1]
    out = values.copy()
    out[rows] = np.where(mine > 0, values[rows] + weight * mine, values[rows])
    return out


def _passage_decay(values: Floats, sources: Ids, decay: float) -> Floats:
    """Of the passages of one message (one ``sources`` code, -1: none), the best keeps its
    score and the k-th next is multiplied by ``decay ** k`` (ties in their order): one
    long answer matching everywhere does not fill a reply with its parts."""
    rows = np.flatnonzero(sources >= 0)
    if not len(rows) or decay >= 1.0:
        return values
    order = rows[np.lexsort((-values[rows], sources[rows]))]  # by source, best first
    codes = sources[order]
    first = np.ones(len(codes), dtype=bool)
    first[1:] = codes[1:] != codes[:-1]
    starts = np.flatnonzero(first)
    rank = np.arange(len(codes)) - np.repeat(starts, np.diff(np.append(starts, len(codes))))
    out = values.copy()
    # Python's pow per rank, not np.power: the two differ in the last bit for some ranks
    powers = np.array([decay ** k for k in range(int(rank.max()) + 1)])
    out[order] = values[order] * powers[rank]
    return out


def _lift_instruction(values: Floats, instruction: Flags, floor: float) -> Floats:
    """``values`` with the best standing instruction at or above ``floor`` (one: the
    first on a tie) raised to the best value; unchanged when there is none."""
    at = np.flatnonzero(instruction & (values >= floor))
    if not len(at):
        return values
    out = values.copy()
    out[at[int(np.argmax(values[at]))]] = float(values.max())
    return out


def confidence(dense_best: float | None, lexical_share: float, ramp: Ramp, *,
               specific: bool = False) -> float:
    """How surely a cube holds anything the query asks about, 0..1, from absolute
    evidence (:class:`Ramp`): the best raw cosine between the query and a memory, and
    the share of the query's words the best lexical match holds. Either signal at its
    ``hi`` gives 1; both at or under their ``lo``, 0; linear between. Without a dense
    signal (no embedder), a lexical match holding a word that says what is asked
    (``specific``: "vegetarian", not "time") gives 1 whatever the share: a long
    request names many things besides."""

    def up(x: float, lo: float, hi: float) -> float:
        return 1.0 if x >= hi else 0.0 if x <= lo else (x - lo) / (hi - lo)

    if dense_best is None:
        return 1.0 if specific else up(lexical_share, ramp.lexical_lo, ramp.lexical_hi)
    return max(up(lexical_share, ramp.lexical_lo, ramp.lexical_hi),
               up(dense_best, ramp.dense_lo, ramp.dense_hi))


@dataclass(frozen=True)
class Ramp:
    """Where :func:`confidence` rises from 0 to 1 for each signal (the raw cosine of the
    best memory; the share of the query's words its best lexical match holds)."""

    dense_lo: float = 0.2
    dense_hi: float = 0.4
    lexical_lo: float = 0.05
    lexical_hi: float = 0.3


def _named_rows(places: Places, at: Ids, query: str) -> Flags:
    """Which of the rows ``at`` of ``places`` (-1: none) a person the query names spoke."""
    spoken = places.speaker[places.speaker >= 0]
    if not len(spoken):
        return np.zeros(len(at), dtype=bool)
    present = np.zeros(len(places.speakers), dtype=bool)
    present[spoken] = True
    codes = np.flatnonzero(present).tolist()
    people = named_people(query, {places.speakers[c] for c in codes})
    named = np.zeros(len(places.speakers) + 1, dtype=bool)  # the last: no speaker (-1)
    named[[c for c in codes if places.speakers[c].casefold() in people]] = True
    return named[np.where(at >= 0, places.speaker[at], -1)]


def fuse_arrays(lexical: tuple[Ids, Floats], dense: tuple[Ids, Floats] | None,
                places: Places, *, query: str = "", weights: FusionWeights = FusionWeights(),
                limit: int | None = None, top_score: float = 1.0) -> tuple[Ids, Floats]:
    """All steps in order over the signals' ``(ids, scores)`` (each id once per signal);
    the result, on 0..1 with the best memory at 1.0, is the dense signal's memories in
    its order, then the lexical signal's others in its order.

    Each signal is normalised over everything it scored; then, with ``limit``, only
    the union of each signal's best ``limit`` memories and their session neighbours
    goes on (keeping both of their scores), which bounds the work per query whatever
    the size of the collection. ``places`` must cover those candidates (and their
    neighbours, for the neighbours to count). The best memory scores ``top_score``
    (the cube's :func:`confidence`; 1.0 by default), the others in proportion."""
    lex = _Signal(lexical[0], _max_scaled(lexical[1]), places)
    den = (_Signal(dense[0], _min_max(dense[1]), places)
           if dense is not None and len(dense[0]) else None)
    if limit is not None:
        keep = np.sort(np.concatenate([lex.ids[_top(lex.values, limit)], *(
            [den.ids[_top(den.values, limit)]] if den is not None else [])]))
        _, keys, has = places.slots(places.index(keep))
        wanted = np.sort(np.concatenate([keys[has] - 1, keys[has] + 1]))
        lex = lex.kept(keep, wanted)
        den = den.kept(keep, wanted) if den is not None else None
    if den is not None and len(den.ids):
        by_id = np.argsort(den.ids)
        rows = rows_of(den.ids[by_id], lex.ids)  # each lexical entry's dense row, or -1
        in_dense = rows >= 0
        alone = np.flatnonzero(~in_dense)
        ids = np.concatenate([den.ids, lex.ids[alone]])
        at = np.concatenate([den.at, lex.at[alone]])
        mixed = np.concatenate([weights.dense * den.values, np.zeros(len(alone))])
        rows[in_dense] = by_id[rows[in_dense]]
        rows[alone] = len(den.ids) + np.arange(len(alone))
        mixed[rows] = mixed[rows] + weights.lexical * lex.values
    else:
        ids, at, mixed = lex.ids, lex.at, lex.values
    if not len(ids):
        return ids, mixed
    if weights.assistant != 1.0 and not about_assistant(query):
        mixed = np.where(places.assistants(at), mixed * weights.assistant, mixed)
    sessions, keys, has = places.slots(at)
    scores = _smooth_neighbours(mixed, keys, has, weights.neighbour)
    scores = _session_boost(scores, sessions, weights.session)
    if weights.person and query:
        scores = np.where(_named_rows(places, at, query), scores + weights.person, scores)
    scores = _passage_decay(scores, places.sources(at), weights.passage_decay)
    top = float(scores.max())
    if top <= 0 or top_score <= 0:
        return ids, np.zeros(len(ids), dtype=np.float64)
    if weights.instruction is not None:
        scores = _lift_instruction(scores, places.instructions(at), weights.instruction * top)
    scaled = scores / top if top_score == 1.0 else scores * (top_score / top)
    return ids, np.where(scaled > 0.0, scaled, 0.0)  # as max(0.0, v): -0.0 and NaN give 0.0


class _Signal:
    """One signal's entries, normalised, with their rows in the places."""

    def __init__(self, ids: Ids, values: Floats, places: Places,
                 at: Ids | None = None) -> None:
        self.ids, self.values, self.places = ids, values, places
        self.at = places.index(ids) if at is None else at

    def kept(self, keep: Ids, wanted: Ids) -> _Signal:
        """The entries among ``keep`` or whose slot is ``wanted`` (both ascending)."""
        _, keys, has = self.places.slots(self.at)
        mask = _member(keep, self.ids) | (has & _member(wanted, keys))
        return _Signal(self.ids[mask], self.values[mask], self.places, self.at[mask])


def fuse(
    lexical: Mapping[str, float],
    dense: Mapping[str, float] | None,
    positions: Mapping[str, Position],
    *,
    query: str = "",
    weights: FusionWeights = FusionWeights(),
    limit: int | None = None,
    top_score: float = 1.0,
) -> Scores:
    """:func:`fuse_arrays` on dicts: ``{memory id: score}`` in, the same out (the dense
    signal's memories first, then the lexical one's others)."""
    numbers: dict[str, int] = {}
    for k in (*positions, *lexical, *(dense or {})):
        numbers.setdefault(k, len(numbers))
    sessions: dict[str, int] = {}
    speakers: dict[str, int] = {}
    sources: dict[str, int] = {}
    keys = sorted(positions, key=numbers.__getitem__)
    said, told = (np.array([getattr(positions[k], f) for k in keys], dtype=bool)
                  if any(getattr(positions[k], f) for k in keys) else np.zeros(0, dtype=bool)
                  for f in ("assistant", "instruction"))
    if any(not -SEQ_LIMIT <= positions[k].seq < SEQ_LIMIT for k in keys):
        raise ValueError("a place's seq is a 32-bit integer")
    places = Places(
        np.array([numbers[k] for k in keys], dtype=np.int64),
        np.array([-1 if (s := positions[k].session) is None else sessions.setdefault(
            s, len(sessions)) for k in keys], dtype=np.int64),
        np.array([positions[k].seq for k in keys], dtype=np.int64),
        np.array([-1 if not (p := positions[k].speaker) else speakers.setdefault(
            p, len(speakers)) for k in keys], dtype=np.int64),
        list(speakers),
        np.array([-1 if (c := positions[k].source) is None else sources.setdefault(
            c, len(sources)) for k in keys], dtype=np.int64),
        said, told)

    def arrays(scores: Mapping[str, float]) -> tuple[Ids, Floats]:
        return (np.array([numbers[k] for k in scores], dtype=np.int64),
                np.array(list(scores.values()), dtype=np.float64))

    ids, out = fuse_arrays(arrays(lexical), arrays(dense) if dense is not None else None,
                           places, query=query, weights=weights, limit=limit,
                           top_score=top_score)
    names = list(numbers)
    return dict(zip([names[i] for i in ids.tolist()], out.tolist(), strict=True))
