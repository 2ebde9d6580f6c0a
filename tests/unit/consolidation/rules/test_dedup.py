"""Local dedup: each rule exactly at and just below its threshold, and merging."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from streams.consolidation.rules.dedup import (
    bigrams,
    contains,
    dedup_candidates,
    drop_covered_by_episodes,
    duplicate_rule,
    jaccard_similarity,
    levenshtein,
    levenshtein_similarity,
    normalize,
    similarity,
    split_speaker,
)
from streams.memory.model import MemoryCandidate

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)

# 36 distinct characters, and replacements that occur in none of them
BASE = "abcdefghijklmnopqrstuvwxyz0123456789"
SPARE = "éüøåçñ"


def substitute(text: str, positions: list[int]) -> str:
    chars = list(text)
    for k, pos in enumerate(positions):
        chars[pos] = SPARE[k]
    return "".join(chars)


def cand(content: str, *, ids: tuple[str, ...] = (), importance: float = 0.5,
         scope: str = "user", minute: int = 0) -> MemoryCandidate:
    return MemoryCandidate(
        content=content, importance=importance, source_event_ids=ids,
        scope="agent" if scope == "agent" else "user", event_time=T0 + timedelta(minutes=minute),
    )


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("Hello,   World!", "hello world"),
        ("I'm  here.", "im here"),
        ("Ｆｕｌｌ－ｗｉｄｔｈ", "full width"),
        ("我住在上海。", "我住在上海"),
        ("  ", ""),
    ],
)
def test_normalize(text: str, normalized: str) -> None:
    assert normalize(text) == normalized


# The fixtures below are checked against their intended similarity first, so
# the threshold tests really sit at and just below the thresholds.
JACCARD_AT = (BASE[:35], substitute(BASE[:35], [5, 15, 25]))  # 28 / 40 bigrams
JACCARD_BELOW = (BASE[:34], substitute(BASE[:34], [5, 15, 25]))  # 27 / 39
LEVENSHTEIN_AT = ("abcdefghij", substitute("abcdefghij", [2, 6]))  # 8 / 10
LEVENSHTEIN_BELOW = ("abcdefghij", substitute("abcdefghij", [1, 4, 7]))  # 7 / 10


def test_fixtures_sit_where_intended() -> None:
    assert jaccard_similarity(*JACCARD_AT) == 0.7
    assert 0.69 < jaccard_similarity(*JACCARD_BELOW) < 0.7
    assert levenshtein_similarity(*LEVENSHTEIN_AT) == 0.8
    assert levenshtein_similarity(*LEVENSHTEIN_BELOW) == pytest.approx(0.7)
    assert jaccard_similarity(*LEVENSHTEIN_AT) < 0.7  # so only Levenshtein can match


@pytest.mark.parametrize(
    ("a", "b", "kwargs", "rule"),
    [
        pytest.param("I like tea.", "i LIKE  tea", {}, "exact", id="exact"),
        pytest.param("I like tea", "I like green tea", {}, None, id="not-exact-nor-contained"),
        pytest.param("I like tea", "Really, I like tea a lot", {}, "containment", id="containment"),
        pytest.param("art", "I started a new job", {}, None, id="containment-needs-word-boundary"),
        pytest.param("喜欢喝茶", "我很喜欢喝茶", {}, "containment", id="containment-chinese"),
        pytest.param(*JACCARD_AT, {"short_len": 0}, "jaccard", id="jaccard-at-0.7"),
        pytest.param(*JACCARD_BELOW, {"short_len": 0}, None, id="jaccard-just-below"),
        pytest.param(*JACCARD_BELOW, {"short_len": 0, "jaccard": 0.69}, "jaccard",
                     id="jaccard-threshold-configurable"),
        pytest.param(*LEVENSHTEIN_AT, {}, "levenshtein", id="levenshtein-at-0.8"),
        pytest.param(*LEVENSHTEIN_BELOW, {}, None, id="levenshtein-just-below"),
        pytest.param(*LEVENSHTEIN_AT, {"short_len": 10}, "levenshtein", id="short-len-inclusive"),
        pytest.param(*LEVENSHTEIN_AT, {"short_len": 9}, None, id="longer-than-short-len"),
        pytest.param(*LEVENSHTEIN_BELOW, {"levenshtein": 0.7}, "levenshtein",
                     id="levenshtein-threshold-configurable"),
    ],
)
def test_rules_at_their_thresholds(
    a: str, b: str, kwargs: dict[str, float], rule: str | None
) -> None:
    result = dedup_candidates([cand(a), cand(b)], **kwargs)  # type: ignore[arg-type]
    if rule is None:
        assert len(result.kept) == 2 and result.dropped == []
    else:
        assert len(result.kept) == 1
        assert [d.rule for d in result.dropped] == [rule]


def test_unrelated_sentences_are_not_merged() -> None:
    a, b = "I live in Berlin with my wife", "My favourite colour is green"
    na, nb = set(normalize(a)), set(normalize(b))
    assert len(na & nb) / len(na | nb) >= 0.5  # plain character sets would look alike
    assert jaccard_similarity(a, b) < 0.2  # bigrams do not
    assert len(dedup_candidates([cand(a), cand(b)]).kept) == 2


def test_containment_keeps_the_longer_and_merges() -> None:
    short = cand("I like tea", ids=("e1",), importance=0.9, minute=1)
    long = cand("I like tea with milk", ids=("e2",), importance=0.4, minute=5)
    for order in ([short, long], [long, short]):
        result = dedup_candidates(order)
        [kept] = result.kept
        assert kept.content == "I like tea with milk"
        assert set(kept.source_event_ids) == {"e1", "e2"}
        assert kept.importance == 0.9
        assert kept.event_time == T0 + timedelta(minutes=5)
        [dropped] = result.dropped
        assert dropped.candidate == short and dropped.rule == "containment"
        assert dropped.duplicate_of == kept


@pytest.mark.parametrize(
    ("a", "b", "also", "rule"),
    [
        pytest.param("I like tea.", "i like tea", ["containment", "jaccard", "levenshtein"],
                     "exact", id="exact-first"),
        pytest.param("I like green tea", "I like green tea a lot", ["jaccard"], "containment",
                     id="containment-before-jaccard"),
        pytest.param("I like tea", "I like teas", ["levenshtein"], "jaccard",
                     id="jaccard-before-levenshtein"),
    ],
)
def test_rules_are_tried_in_order(a: str, b: str, also: list[str], rule: str) -> None:
    for other in also:  # the pair matches the later rules too
        assert duplicate_rule(a, b, other)  # type: ignore[arg-type]
    assert [d.rule for d in dedup_candidates([cand(a), cand(b)]).dropped] == [rule]


def test_dropped_points_at_the_final_kept_candidate() -> None:
    result = dedup_candidates([cand("I like tea", ids=("e1",)), cand("I like tea", ids=("e2",)),
                               cand("Yes, I like tea very much", ids=("e3",))])
    [kept] = result.kept
    assert kept.source_event_ids == ("e3", "e1", "e2")
    assert [d.duplicate_of for d in result.dropped] == [kept, kept]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        pytest.param(cand("I like tea"), cand("I like tea", scope="agent"), id="different-scopes"),
        pytest.param(cand("Caroline: I like tea"), cand("Melanie: I like tea"),
                     id="different-speakers"),
    ],
)
def test_never_merged(a: MemoryCandidate, b: MemoryCandidate) -> None:
    assert len(dedup_candidates([a, b]).kept) == 2


def test_named_and_unnamed_statement_merge_into_the_named_one() -> None:
    [kept] = dedup_candidates([cand("I like tea"), cand("Caroline: I like tea")]).kept
    assert kept.content == "Caroline: I like tea"


@pytest.mark.parametrize(
    ("a", "b", "limit", "distance"),
    [
        ("kitten", "sitting", None, 3),
        ("", "abc", None, 3),
        ("abc", "abc", 0, 0),
        ("kitten", "sitting", 1, 2),  # early exit: limit + 1
        ("a", "abcdefgh", 2, 3),  # length difference alone exceeds the limit
        ("flaw", "lawn", None, 2),
    ],
)
def test_levenshtein(a: str, b: str, limit: int | None, distance: int) -> None:
    assert levenshtein(a, b, limit) == distance
    assert levenshtein(b, a, limit) == distance


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("I like tea.", "i like tea", 1.0),
        ("abcdefghij", "abXdefYhij", 0.8),
        ("", "", 1.0),
    ],
)
def test_similarity(a: str, b: str, expected: float) -> None:
    assert similarity(a, b) == pytest.approx(expected)


def test_similarity_ignores_levenshtein_for_long_texts() -> None:
    a, b = LEVENSHTEIN_AT
    assert similarity(a, b, short_len=5) == pytest.approx(jaccard_similarity(a, b))


@pytest.mark.parametrize(
    ("outer", "inner", "expected"),
    [("i like tea a lot", "i like tea", True), ("i started", "art", False),
     ("我很喜欢茶", "喜欢茶", True), ("abc", "", False)],
)
def test_contains(outer: str, inner: str, expected: bool) -> None:
    assert contains(outer, inner) is expected


@pytest.mark.parametrize(
    ("text", "speaker", "rest"),
    [
        ("Caroline: I went home", "Caroline", "I went home"),
        ("Mary Ann: hi there", "Mary Ann", "hi there"),
        ("小明：我住在上海", "小明", "我住在上海"),
        ("I live: here", None, "I live: here"),
        ("note: lowercase", None, "note: lowercase"),
        ("Caroline:", None, "Caroline:"),
    ],
)
def test_split_speaker(text: str, speaker: str | None, rest: str) -> None:
    assert split_speaker(text) == (speaker, rest)


def test_bigrams_of_tiny_texts() -> None:
    assert bigrams("") == frozenset() and bigrams("a") == {"a"}
    assert bigrams("ab c") == {"ab", "b ", " c"}


def _cand(text: str, kind: str, *sources: str) -> MemoryCandidate:
    return MemoryCandidate(content=text, source_event_ids=sources, kind=kind)  # type: ignore[arg-type]


@pytest.mark.parametrize(("cand", "dropped"), [
    pytest.param(_cand("Caroline: I painted it after the beach trip.", "episode", "e1"), True,
                 id="a-sentence-of-the-turn"),
    pytest.param(_cand("Caroline: I painted it after the beach trip.", "fact", "e1"), False,
                 id="facts-stay"),
    pytest.param(_cand("Caroline: I painted it after the beach trip.", "episode", "e2"), False,
                 id="another-message"),
    pytest.param(_cand("Caroline: I painted it after the beach trip.", "episode", "e1", "e2"),
                 False, id="merged-from-two-messages"),
    pytest.param(_cand("Caroline: I sold it at the fair.", "episode", "e1"), False,
                 id="not-in-the-turn"),
])
def test_episodes_within_a_turn_kept_whole_are_dropped(cand: MemoryCandidate,
                                                       dropped: bool) -> None:
    turn = _cand("Caroline: Thanks, Mel! I painted it after the beach trip. Do you like it?",
                 "episode", "e1")
    got = drop_covered_by_episodes([cand], [turn])
    assert [d.candidate for d in got.dropped] == ([cand] if dropped else [])
    assert got.kept == ([] if dropped else [cand])
    if dropped:
        assert got.dropped[0].rule == "containment" and got.dropped[0].duplicate_of is turn


def test_candidates_of_different_owners_are_never_merged() -> None:
    a, b, c = cand("I'm 25 years old."), cand("I'm 39 years old."), cand("I'm 25 years old")
    owner = {id(a): "alice", id(b): "bob", id(c): "alice"}
    result = dedup_candidates([a, b, c], owner=lambda x: owner[id(x)])
    assert [k.content for k in result.kept] == ["I'm 25 years old.", "I'm 39 years old."]
    assert len(dedup_candidates([a, b]).kept) == 1  # one speaker: a near-duplicate
