"""Score fusion for hybrid retrieval: one query, many candidate memories.

The pipeline, every step a pure function over ``{memory id: score}``, with the
weights of :class:`FusionWeights` (chosen by leave-one-conversation-out
rotation on LoCoMo, ``make bench-rotation``):

1. each signal goes on 0..1 for this query, best hit = 1: BM25 through
   :func:`max_scaled` (0 means no match, so a weak match keeps its share of
   the best: with min-max the weakest of a few matches would score 0 however
   good it is), cosine through :func:`min_max` (unrelated texts do not score 0);
2. :func:`weighted` mixes them: ``0.5 * dense + 0.5 * lexical`` when a dense
   signal exists, the lexical one alone otherwise;
3. :func:`smooth_neighbours` adds ``0.4 *`` the better score of the previous
   and the next message of the same session: an answer is often the reply to
   the message that matched the words of the question;
4. :func:`session_boost` adds ``0.4 *`` the best score within the memory's
   session: a session about the topic is a good place to look;
5. :func:`person_prior` adds ``0.25`` to memories by a person the question
   names ("What did Caroline paint?").

:func:`fuse` runs them all and rescales so the best memory scores 1.0.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import NamedTuple

Scores = dict[str, float]


class Position(NamedTuple):
    """Where a memory sits: its session (None for a standalone fact) and order in it."""

    session: str | None
    seq: int
    speaker: str | None = None


@dataclass(frozen=True)
class FusionWeights:
    """The weights of :func:`fuse`; the defaults are the ones the rotation chose (the
    build before used 0.7, 0.3, 0.3, 0.1, 0.05: docs/benchmarks.md, *Rotation*)."""

    dense: float = 0.5
    lexical: float = 0.5
    neighbour: float = 0.4
    session: float = 0.4
    person: float = 0.25


_SPEAKER = re.compile(r"^\s*([^\W\d_][\w .'’-]{0,60}?)\s*:\s")


def speaker_of(content: str) -> str | None:
    """The speaker of an episodic memory written as ``"Name: text"``, if any."""
    m = _SPEAKER.match(content)
    return m.group(1) if m else None


def top_n(scores: Mapping[str, float], n: int | None) -> Scores:
    """The ``n`` best entries (all of them when ``n`` is None); ties keep insertion order."""
    if n is None or len(scores) <= n:
        return dict(scores)
    best = sorted(scores.items(), key=lambda kv: kv[1], reverse=True)[: max(n, 0)]
    return dict(best)


def min_max(scores: Mapping[str, float]) -> Scores:
    """Rescale to 0..1 (the best 1.0, the worst 0.0); all-equal scores become 1.0."""
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    if hi - lo <= 1e-12:
        return dict.fromkeys(scores, 1.0)
    span = hi - lo
    return {k: (v - lo) / span for k, v in scores.items()}


def max_scaled(scores: Mapping[str, float]) -> Scores:
    """Divide by the best score (non-negative scores); all zero stays zero."""
    hi = max(scores.values(), default=0.0)
    if hi <= 0:
        return dict(scores)
    return {k: v / hi for k, v in scores.items()}


def weighted(
    lexical: Mapping[str, float],
    dense: Mapping[str, float] | None,
    *,
    dense_weight: float = 0.7,
    lexical_weight: float = 0.3,
) -> Scores:
    """Mix normalised signals; without ``dense`` the lexical scores alone, unchanged."""
    if not dense:
        return dict(lexical)
    out = {k: dense_weight * v for k, v in dense.items()}
    for k, v in lexical.items():
        out[k] = out.get(k, 0.0) + lexical_weight * v
    return out


def neighbours(ids: Collection[str], positions: Mapping[str, Position]) -> set[str]:
    """The previous and next memories of the same session, of each of ``ids``."""
    wanted: set[tuple[str, int]] = set()
    for k in ids:
        p = positions.get(k)
        if p is not None and p.session is not None:
            wanted.update(((p.session, p.seq - 1), (p.session, p.seq + 1)))
    if not wanted:
        return set()
    return {
        k for k, p in positions.items() if p.session is not None and (p.session, p.seq) in wanted
    }


def smooth_neighbours(
    scores: Mapping[str, float], positions: Mapping[str, Position], *, weight: float = 0.3
) -> Scores:
    """Add ``weight *`` max(score of the previous, score of the next message of the session)."""
    by_slot: dict[tuple[str, int], float] = {}
    for k, v in scores.items():
        p = positions.get(k)
        if p is not None and p.session is not None:
            by_slot[(p.session, p.seq)] = v
    out: Scores = {}
    for k, v in scores.items():
        p = positions.get(k)
        if p is None or p.session is None:
            out[k] = v
            continue
        prev = by_slot.get((p.session, p.seq - 1), 0.0)
        nxt = by_slot.get((p.session, p.seq + 1), 0.0)
        out[k] = v + weight * max(prev, nxt)
    return out


def session_boost(
    scores: Mapping[str, float], positions: Mapping[str, Position], *, weight: float = 0.1
) -> Scores:
    """Add ``weight *`` the best score found in the memory's session."""
    best: dict[str, float] = {}
    for k, v in scores.items():
        p = positions.get(k)
        if p is not None and p.session is not None and v > best.get(p.session, 0.0):
            best[p.session] = v
    out: Scores = {}
    for k, v in scores.items():
        p = positions.get(k)
        out[k] = v + weight * best[p.session] if p and p.session in best else v
    return out


def named_people(query: str, speakers: Collection[str]) -> set[str]:
    """The speakers (case-folded) whose name, or first name, the query mentions."""
    words = set(re.findall(r"[^\W_]+", query.casefold()))
    out: set[str] = set()
    for s in speakers:
        parts = s.casefold().split()
        if parts and (parts[0] in words or s.casefold() in query.casefold()):
            out.add(s.casefold())
    return out


def person_prior(
    scores: Mapping[str, float],
    positions: Mapping[str, Position],
    people: Collection[str],
    *,
    weight: float = 0.05,
) -> Scores:
    """Add ``weight`` to memories spoken by one of ``people`` (case-folded names)."""
    if not people:
        return dict(scores)
    out: Scores = {}
    for k, v in scores.items():
        p = positions.get(k)
        who = p.speaker.casefold() if p and p.speaker else None
        out[k] = v + weight if who in people else v
    return out


def fuse(
    lexical: Mapping[str, float],
    dense: Mapping[str, float] | None,
    positions: Mapping[str, Position],
    *,
    query: str = "",
    weights: FusionWeights = FusionWeights(),
    limit: int | None = None,
) -> Scores:
    """All steps in order; the result is on 0..1 with the best memory at 1.0.

    Each signal is normalised over everything it scored; then, with ``limit``,
    only the union of each signal's best ``limit`` memories and their session
    neighbours goes on (keeping both of their scores), which bounds the work
    per query whatever the size of the collection. ``positions`` must cover
    those candidates (and their neighbours, for the neighbours to count).
    """
    lex = max_scaled(lexical)
    den = min_max(dense) if dense else None
    if limit is not None:
        keep = set(top_n(lex, limit)) | (set(top_n(den, limit)) if den else set())
        keep |= neighbours(keep, positions)
        lex = {k: v for k, v in lex.items() if k in keep}
        den = {k: v for k, v in den.items() if k in keep} if den else None
    mixed = weighted(lex, den, dense_weight=weights.dense, lexical_weight=weights.lexical)
    if not mixed:
        return {}
    smoothed = smooth_neighbours(mixed, positions, weight=weights.neighbour)
    boosted = session_boost(smoothed, positions, weight=weights.session)
    if weights.person and query:
        speakers = {p.speaker for p in positions.values() if p.speaker}
        boosted = person_prior(
            boosted, positions, named_people(query, speakers), weight=weights.person
        )
    top = max(boosted.values())
    if top <= 0:
        return dict.fromkeys(boosted, 0.0)
    return {k: max(0.0, v / top) for k, v in boosted.items()}
