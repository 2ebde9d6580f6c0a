"""Local dedup gives what the rules say, pair by pair: the batch function (each text
normalised once, Jaccard skipped where the sizes rule it out, RapidFuzz's edit
distance) against the plain reading of the module docstring — every kept candidate
compared under each rule in turn, each rule computed from the raw texts as the
docstring states it — on generated batches of near-duplicates, speakers, owners,
scopes and Chinese text; and :func:`duplicate_rule` against that plain reading."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from streams.consolidation.rules.dedup import (
    RULES,
    DedupResult,
    Dropped,
    Rule,
    contains,
    dedup_candidates,
    duplicate_rule,
    jaccard_similarity,
    levenshtein,
    levenshtein_similarity,
    merge,
    normalize,
    split_speaker,
)
from streams.memory.model import MemoryCandidate

WORDS = ["I", "like", "likes", "tea", "Tea", "green", "tea.", "my", "dog", "Rex",
         "lives", "in", "Paris", "paris,", "bag", "42", "43", "喜欢", "绿茶", "我", ""]
SPEAKERS = ["", "", "Caroline: ", "Melanie: ", "caroline: ", "小明："]


def plain_rule(a: str, b: str, rule: Rule, *, jaccard: float, levenshtein: float,
               short_len: int) -> bool:
    sa, sb = split_speaker(a)[0], split_speaker(b)[0]
    if sa is not None and sb is not None and sa.casefold() != sb.casefold():
        return False
    na, nb = normalize(a), normalize(b)
    if rule == "exact":
        return na == nb
    if rule == "containment":
        return contains(na, nb) or contains(nb, na)
    if rule == "jaccard":
        return jaccard_similarity(na, nb) >= jaccard
    if len(na) > short_len or len(nb) > short_len:
        return False
    return levenshtein_similarity(na, nb, levenshtein) >= levenshtein


def reference(cands: Sequence[MemoryCandidate], *, jaccard: float, levenshtein: float,
              short_len: int, owner: Callable[[MemoryCandidate], str] | None
              ) -> DedupResult:
    slots: list[MemoryCandidate] = []
    originals: list[MemoryCandidate] = []
    owners: list[str] = []
    drops: list[tuple[MemoryCandidate, Rule, int]] = []
    for cand in cands:
        mine = owner(cand) if owner is not None else ""
        match = next(((rule, i) for rule in RULES for i, kept in enumerate(slots)
                      if kept.scope == cand.scope and owners[i] == mine and plain_rule(
                          kept.content, cand.content, rule, jaccard=jaccard,
                          levenshtein=levenshtein, short_len=short_len)), None)
        if match is None:
            slots.append(cand)
            originals.append(cand)
            owners.append(mine)
            continue
        rule, i = match
        if len(normalize(cand.content)) > len(normalize(slots[i].content)):
            drops.append((originals[i], rule, i))
            slots[i], originals[i] = merge(cand, slots[i]), cand
        else:
            drops.append((cand, rule, i))
            slots[i] = merge(slots[i], cand)
    return DedupResult(kept=slots, dropped=[Dropped(c, r, slots[i]) for c, r, i in drops])


texts = st.builds(lambda speaker, words, end: speaker + " ".join(words) + end,
                  st.sampled_from(SPEAKERS),
                  st.lists(st.sampled_from(WORDS), min_size=0, max_size=9),
                  st.sampled_from(["", ".", "!", " ", "’s"]))
candidates = st.lists(st.builds(
    lambda text, scope, n, who: MemoryCandidate(text, scope=scope, source_event_ids=(f"e{n}",),
                                                importance=n / 10,
                                                subjects=(who,)),
    texts, st.sampled_from(["user", "agent"]), st.integers(0, 9),
    st.sampled_from(["u1", "u2"])), max_size=40)


@settings(max_examples=300, deadline=None)
@given(candidates, st.sampled_from([0.0, 0.5, 0.7, 1.0]),
       st.sampled_from([0.0, 0.6, 0.8, 1.0, 1.5]),
       st.sampled_from([5, 20, 50]), st.booleans())
def test_the_batch_gives_what_the_rules_give_pair_by_pair(
        cands: list[MemoryCandidate], jaccard: float, lev: float, short_len: int,
        by_owner: bool) -> None:
    owner = (lambda c: c.subjects[0]) if by_owner else None
    kw = dict(jaccard=jaccard, levenshtein=lev, short_len=short_len, owner=owner)
    assert dedup_candidates(cands, **kw) == reference(cands, **kw)  # type: ignore[arg-type]


def plain_levenshtein(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="abc é绿茶", max_size=12), st.text(alphabet="abc é绿茶", max_size=12),
       st.one_of(st.none(), st.integers(-3, 14)))
def test_edit_distance_is_exact_up_to_the_bound(a: str, b: str, bound: int | None) -> None:
    d = plain_levenshtein(a, b)
    expected = d if bound is None or d <= bound else bound + 1
    if bound is not None and bound < 0:  # as the bounded DP stops: before any row
        expected = 0 if a == b else bound + 1
    assert levenshtein(a, b, bound) == expected


@settings(max_examples=300, deadline=None)
@given(texts, texts, st.sampled_from(RULES), st.sampled_from([0.0, 0.5, 0.7, 1.0]),
       st.sampled_from([0.0, 0.6, 0.8, 1.5]), st.sampled_from([5, 20, 50]))
def test_one_rule_on_two_texts_is_the_plain_reading(a: str, b: str, rule: Rule,
                                                     jaccard: float, lev: float,
                                                     short_len: int) -> None:
    kw = dict(jaccard=jaccard, levenshtein=lev, short_len=short_len)
    assert duplicate_rule(a, b, rule, **kw) == plain_rule(a, b, rule, **kw)  # type: ignore[arg-type]
