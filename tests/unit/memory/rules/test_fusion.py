"""The fusion rule: its steps' behaviour, and :func:`fuse` (array work) against a
reference that runs the steps one by one on dicts, as the module's docstring
reads them, for the same scores bit for bit."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.memory.rules.fusion import (
    FusionWeights,
    Position,
    Scores,
    about_assistant,
    fuse,
    named_people,
    speaker_of,
)

P = {
    "a": Position("s1", 0, "Alice"),
    "b": Position("s1", 1, "Bob"),
    "c": Position("s1", 2, "Alice"),
    "d": Position("s2", 0, "Bob"),
    "f": Position(None, 0),
}
PLAIN = FusionWeights(dense=0.5, lexical=0.5, neighbour=0.0, session=0.0, person=0.0)


def test_lexical_keeps_its_proportions_the_weakest_match_is_not_zero() -> None:
    got = fuse({"f": 2.0, "g": 1.0}, None, {"f": Position(None, 0), "g": Position(None, 1)},
               weights=FusionWeights(person=0))
    assert got == {"f": 1.0, "g": 0.5}
    assert fuse({"a": 0.0, "f": 0.0}, None, P, weights=PLAIN) == {"a": 0.0, "f": 0.0}
    assert fuse({}, None, P) == {}


def test_dense_goes_through_min_max_and_the_signals_mix_half_and_half() -> None:
    # dense 0.2 / 0.4 / 0.3 -> 0, 1, 0.5; lexical 1.0 / 0.5 -> 1, 0.5
    got = fuse({"a": 1.0, "d": 0.5}, {"a": 0.2, "d": 0.4, "f": 0.3}, P, weights=PLAIN)
    assert got == pytest.approx({"a": 0.5 / 0.75, "d": 1.0, "f": 0.25 / 0.75})
    assert list(got) == ["a", "d", "f"]  # the dense signal's order, then the lexical one's
    assert fuse({"a": 1.0}, {"a": 7.0, "d": 7.0}, P, weights=PLAIN) == {"a": 1.0, "d": 0.5}


def test_neighbour_smoothing_adds_40_percent_of_the_better_neighbour() -> None:
    w = FusionWeights(neighbour=0.4, session=0.0, person=0.0)
    got = fuse({"a": 0.2, "b": 0.0, "c": 1.0, "d": 0.9, "f": 0.4}, None, P, weights=w)
    assert got == pytest.approx({"a": 0.2, "b": 0.4, "c": 1.0, "d": 0.9, "f": 0.4})


def test_session_boost_adds_40_percent_of_the_sessions_best() -> None:
    w = FusionWeights(neighbour=0.0, session=0.4, person=0.0)
    got = fuse({"a": 0.5, "b": 0.2, "d": 0.3, "f": 1.0}, None, P, weights=w)
    assert got == pytest.approx({"a": 0.5 + 0.2, "b": 0.2 + 0.2, "d": 0.3 + 0.12, "f": 1.0})


def test_person_prior_for_the_named_speaker() -> None:
    assert named_people("What did alice paint?", {"Alice", "Bob"}) == {"alice"}
    assert named_people("What did Jon Smith say?", {"Jon Smith"}) == {"jon smith"}
    w = FusionWeights(neighbour=0.0, session=0.0, person=0.25)
    got = fuse({"a": 0.5, "b": 0.5, "f": 0.5}, None, P, query="What did alice paint?",
               weights=w)
    assert got == pytest.approx({"a": 1.0, "b": 1.0 / 1.25, "f": 1.0 / 1.25})
    assert fuse({"a": 0.5, "b": 0.5}, None, P, weights=w) == {"a": 1.0, "b": 1.0}  # no query


def test_fuse_ends_on_0_to_1_with_the_best_at_1() -> None:
    lexical = {"a": 3.0, "b": 1.0, "d": 2.0}
    dense = {"a": 0.1, "b": 0.8, "c": 0.2, "d": 0.4, "f": 0.3}
    got = fuse(lexical, dense, P, query="what did Bob say")
    assert max(got.values()) == pytest.approx(1.0)
    assert all(0.0 <= v <= 1.0 for v in got.values())
    assert max(got, key=lambda k: got[k]) == "b"
    lexical_only = fuse(lexical, None, P)
    assert max(lexical_only, key=lambda k: lexical_only[k]) == "a"
    assert set(lexical_only) == set(lexical)


def test_limit_keeps_the_best_candidates_and_their_neighbours() -> None:
    lexical = {"a": 1.0, "b": 0.9, "c": 0.1, "d": 0.05}
    got = fuse(lexical, None, P, limit=1, weights=FusionWeights(person=0))
    assert set(got) == {"a", "b"}
    got = fuse({"x": 1.0, "y": 3.0, "z": 2.0}, None, {}, limit=2, weights=PLAIN)
    assert set(got) == {"y", "z"}


@pytest.mark.parametrize(
    ("content", "speaker"),
    [("Caroline: I went hiking", "Caroline"), ("Jon Smith: hi", "Jon Smith"),
     ("no speaker here", None), ("10:30 meeting", None)],
)
def test_speaker_of(content: str, speaker: str | None) -> None:
    assert speaker_of(content) == speaker


# The reference: the steps as dict functions.

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


def passage_decay(scores: Mapping[str, float], positions: Mapping[str, Position], *,
                  decay: float) -> Scores:
    """Of the memories of one source, the k-th best (ties in their order) times decay ** k."""
    groups: dict[str, list[str]] = {}
    for k in scores:
        p = positions.get(k)
        if p is not None and p.source is not None:
            groups.setdefault(p.source, []).append(k)
    out = dict(scores)
    if decay >= 1.0:
        return out
    for ks in groups.values():
        for rank, k in enumerate(sorted(ks, key=lambda k: -scores[k])):
            out[k] = scores[k] * decay ** rank
    return out


def lift_instruction(scores: Mapping[str, float], positions: Mapping[str, Position], *,
                     floor: float) -> Scores:
    """The best standing instruction at or above ``floor`` (the first of equals) raised to
    the best score."""
    told = [k for k, v in scores.items()
            if (p := positions.get(k)) is not None and p.instruction and v >= floor]
    out = dict(scores)
    if told:
        best = max(told, key=lambda k: (scores[k], -told.index(k)))
        out[best] = max(scores.values())
    return out


def reference_fuse(lexical: Mapping[str, float], dense: Mapping[str, float] | None,
                   positions: Mapping[str, Position], *, query: str, weights: FusionWeights,
                   limit: int | None, top_score: float = 1.0) -> Scores:
    """The steps one after the other on dicts, as the rule reads.

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
    if weights.assistant != 1.0 and not about_assistant(query):
        mixed = {k: v * weights.assistant if (p := positions.get(k)) is not None and p.assistant
                 else v for k, v in mixed.items()}
    smoothed = smooth_neighbours(mixed, positions, weight=weights.neighbour)
    boosted = session_boost(smoothed, positions, weight=weights.session)
    if weights.person and query:
        speakers = {p.speaker for p in positions.values() if p.speaker}
        boosted = person_prior(
            boosted, positions, named_people(query, speakers), weight=weights.person
        )
    boosted = passage_decay(boosted, positions, decay=weights.passage_decay)
    top = max(boosted.values())
    if top <= 0 or top_score <= 0:
        return dict.fromkeys(boosted, 0.0)
    if weights.instruction is not None:
        boosted = lift_instruction(boosted, positions, floor=weights.instruction * top)
    if top_score == 1.0:
        return {k: max(0.0, v / top) for k, v in boosted.items()}
    return {k: max(0.0, v * (top_score / top)) for k, v in boosted.items()}


KEYS = [f"m{i}" for i in range(14)]
SCORE = st.one_of(st.sampled_from([0.0, -0.0, 0.5, 1.0, 2.0]),
                  st.floats(0.0, 40.0, allow_nan=False, allow_infinity=False))
POSITION = st.builds(Position, st.sampled_from([None, "s1", "s2", "s3"]),
                     st.integers(-2, 5), st.sampled_from([None, "Alice", "alice", "Bob Lee", ""]),
                     st.sampled_from([None, "e1", "e2", ""]), st.booleans(), st.booleans())


@settings(max_examples=600, deadline=None)
@given(lexical=st.dictionaries(st.sampled_from(KEYS), SCORE, max_size=12),
       dense=st.one_of(st.none(), st.dictionaries(
           st.sampled_from(KEYS), st.floats(-1.0, 1.0, allow_nan=False), max_size=12)),
       positions=st.dictionaries(st.sampled_from(KEYS), POSITION, max_size=14),
       query=st.sampled_from(["", "what did alice say", "Bob Lee?", "anything",
                              "what did you suggest to alice"]),
       limit=st.one_of(st.none(), st.integers(0, 6)),
       weights=st.builds(FusionWeights, st.sampled_from([0.5, 0.7]), st.sampled_from([0.5, 0.3]),
                         st.sampled_from([0.0, 0.4]), st.sampled_from([0.0, 0.4]),
                         st.sampled_from([0.0, 0.25]), st.sampled_from([1.0, 0.5, 0.7, 0.0]),
                         st.sampled_from([1.0, 0.5, 0.0]),
                         st.sampled_from([None, 0.0, 0.2, 1.0])),
       top_score=st.sampled_from([1.0, 0.5, 0.0, 0.123]))
def test_fuse_is_the_reference_bit_for_bit(
        lexical: dict[str, float], dense: dict[str, float] | None,
        positions: dict[str, Position], query: str, limit: int | None,
        weights: FusionWeights, top_score: float) -> None:
    """Same keys in the same order, same floats: duplicate slots (the last one counts),
    memories with no place, a dense signal emptied by the limit, ties at the cut,
    passages of one message, an assistant's episodes, a cube's confidence."""
    want = reference_fuse(lexical, dense, positions, query=query, weights=weights, limit=limit,
                          top_score=top_score)
    got = fuse(lexical, dense, positions, query=query, weights=weights, limit=limit,
               top_score=top_score)
    assert [(k, v.hex()) for k, v in got.items()] == [(k, v.hex()) for k, v in want.items()]


def test_the_best_relevant_standing_instruction_is_lifted_to_the_top() -> None:
    positions = {"t1": Position("s", 0), "t2": Position("s", 1),
                 "i1": Position("s", 2, instruction=True), "i2": Position("s", 3, instruction=True)}
    lexical = {"t1": 10.0, "t2": 8.0, "i1": 3.0, "i2": 2.5}
    w = FusionWeights(neighbour=0.0, session=0.0, person=0.0, instruction=0.2)
    got = fuse(lexical, None, positions, weights=w)
    assert got == {"t1": 1.0, "t2": 0.8, "i1": 1.0, "i2": 0.25}  # one only: the best
    assert fuse(lexical, None, positions, weights=FusionWeights(
        neighbour=0.0, session=0.0, person=0.0, instruction=None))["i1"] == 0.3
    # below the floor (a share of the best memory) it keeps its rank
    assert fuse(lexical, None, positions, weights=FusionWeights(
        neighbour=0.0, session=0.0, person=0.0, instruction=0.4))["i1"] == 0.3
    # an instruction that is already the best stays where it is; the others are untouched
    assert fuse({"i1": 5.0, "t1": 4.0}, None, positions, weights=w) == {"i1": 1.0, "t1": 0.8}


def test_a_seq_beyond_32_bits_is_refused() -> None:
    with pytest.raises(ValueError, match="32-bit"):
        fuse({"a": 1.0}, None, {"a": Position("s", 2**31)})
    assert fuse({"a": 1.0}, None, {"a": Position("s", -(2**31))}) == {"a": 1.0}


@pytest.mark.parametrize(("query", "expected"), [
    ("Which composite index did you suggest for the transactions table?", True),
    ("How did you recommend structuring my writing process?", True),
    ("What was your recommendation for the cache?", True),
    ("You suggested a library last week, which one?", True),
    ("What did the assistant suggest for dinner?", True),
    ("what'd you suggest for dinner?", True),
    ("What was recommended for dinner?", True),
    ("How would you suggest breaking up my work sessions?", False),  # asks anew
    ("Can you give me a summary of my project?", False),
    ("What did I say about the deadline?", False),
])
def test_a_query_about_what_the_assistant_said(query: str, expected: bool) -> None:
    assert about_assistant(query) is expected


def test_an_assistants_turn_weighs_less_unless_the_query_asks_what_it_said() -> None:
    positions = {"u": Position("s", 0, "User"), "a": Position("s", 1, "Assistant", None, True)}
    lexical = {"u": 1.0, "a": 1.0}
    weights = FusionWeights(neighbour=0.0, session=0.0, person=0.0, assistant=0.3)
    plain = fuse(lexical, None, positions, query="which cache", weights=weights)
    asked = fuse(lexical, None, positions, query="which cache did you suggest", weights=weights)
    assert plain == {"u": 1.0, "a": 0.3}
    assert asked == {"u": 1.0, "a": 1.0}
