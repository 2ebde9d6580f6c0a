from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams.memory.rules.lexical import (
    KeptParts,
    PostingArrays,
    bm25,
    bm25_arrays,
    query_terms,
    stem,
    term_counts,
    tokenize,
)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("painting", "paints"),
        ("painted", "paint"),
        ("hoping", "hopes"),
        ("running", "runs"),
        ("cities", "city"),
        ("studied", "studying"),
        ("games", "gaming"),
        ("writing", "write"),
    ],
)
def test_inflections_meet_at_one_stem(a: str, b: str) -> None:
    assert stem(a) == stem(b)


@pytest.mark.parametrize("word", ["hop", "bus", "glass", "3rd", "2023", "status"])
def test_short_words_numbers_and_non_plurals_keep_their_form(word: str) -> None:
    assert stem(word) == word


def test_documents_are_case_folded_stemmed_and_stripped_of_stopwords() -> None:
    assert tokenize("Caroline's PAINTINGS were on the wall in 2023!") == [
        "carolin", "paint", "wall", "2023"
    ]


def test_numbers_are_kept() -> None:
    assert tokenize("7 May, 2023 at 10:30") == ["7", "may", "2023", "10", "30"]


def test_chinese_runs_become_unigrams_and_bigrams() -> None:
    assert tokenize("我喜欢苹果") == [
        "我", "喜", "欢", "苹", "果", "我喜", "喜欢", "欢苹", "苹果"
    ]


def test_cjk_next_to_latin_and_in_japanese_and_korean() -> None:
    assert tokenize("iPhone手机") == ["iphon", "手", "机", "手机"]
    assert tokenize("東京タワー")[-4:] == ["東京", "京タ", "タワ", "ワー"]
    assert tokenize("안녕 세계") == ["안", "녕", "안녕", "세", "계", "세계"]


def test_chinese_query_meets_chinese_document() -> None:
    doc = set(tokenize("我喜欢在周末去爬山"))
    assert set(query_terms("周末爬山")) <= doc | {"末爬"}
    assert {"周末", "爬山"} <= doc


def test_query_terms_drop_question_words_and_repeats() -> None:
    assert query_terms("When did Caroline go to the LGBTQ support group?") == [
        "carolin", "go", "lgbtq", "support", "group"
    ]
    assert query_terms("What? Who? How many books, books!") == ["book"]


def test_documents_keep_question_words() -> None:
    assert "where" not in query_terms("where")
    assert tokenize("Where the wild things are") == ["where", "wild", "thing"]


def test_term_counts() -> None:
    assert term_counts(["a", "b", "a"]) == {"a": 2, "b": 1}


POSTINGS = {
    "cello": [("d1", 2), ("d2", 1)],
    "peanut": [("d3", 1)],
}
LENGTHS = {"d1": 4, "d2": 8, "d3": 4}


def test_bm25_matches_the_formula() -> None:
    got = bm25(["peanut"], POSTINGS, LENGTHS, n_docs=3, avg_len=16 / 3)
    idf = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    tf_part = 1 * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 4 / (16 / 3)))
    assert got == {"d3": pytest.approx(idf * tf_part)}


def test_bm25_prefers_rare_terms_frequent_terms_and_short_documents() -> None:
    got = bm25(["cello", "peanut"], POSTINGS, LENGTHS, n_docs=3, avg_len=16 / 3)
    assert set(got) == {"d1", "d2", "d3"}
    assert got["d1"] > got["d2"]  # more occurrences in a shorter document
    assert got["d3"] > got["d2"]  # the rarer term weighs more


def test_bm25_without_length_normalisation_and_unknown_terms() -> None:
    flat = bm25(["cello"], {"cello": [("a", 1), ("b", 1)]}, {"a": 2, "b": 50}, 10, 10.0, b=0.0)
    assert flat["a"] == pytest.approx(flat["b"])
    assert bm25(["missing"], POSTINGS, LENGTHS, 3, 5.0) == {}
    assert bm25([], POSTINGS, LENGTHS, 3, 5.0) == {}


def _arrays(plist: list[tuple[str, int]], lengths: dict[str, int]) -> PostingArrays:
    return (np.array([int(d) for d, _ in plist], dtype=np.int64),
            np.array([float(tf) for _, tf in plist]),
            np.array([float(lengths[d]) for d, _ in plist]))


def test_bm25_arrays_give_bm25_bit_for_bit_in_the_same_order() -> None:
    docs = {str(i): tokenize(text) for i, text in enumerate([
        "Alice paints landscapes in the garden", "Bob paints the fence twice, paints again",
        "the garden party was rained out", "Alice and Bob went hiking", "painting classes",
        "garden garden garden"], start=10)}
    postings: dict[str, list[tuple[str, int]]] = {}
    for doc, terms in docs.items():  # ascending ids per term, as the index stores them
        for term, tf in term_counts(terms).items():
            postings.setdefault(term, []).append((doc, tf))
    lengths = {d: len(t) for d, t in docs.items()}
    avg = sum(lengths.values()) / len(lengths)
    arrays = {t: _arrays(p, lengths) for t, p in postings.items()}
    for query in ("Who paints in the garden?", "hiking Alice", "fence party paint", "nothing"):
        terms = query_terms(query)
        expected = bm25(terms, postings, lengths, 40, avg)
        ids, scores = bm25_arrays(terms, arrays, 40, avg)
        assert [str(i) for i in ids.tolist()] == list(expected)
        assert scores.tolist() == list(expected.values())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(1, 40), st.integers(1, 5)), max_size=30),
                min_size=1, max_size=6),
       st.sampled_from([1, 7, 1_000_003]), st.integers(0, 10**12))
def test_bm25_arrays_give_bm25_bit_for_bit_however_the_ids_are_spread(
        terms: list[list[tuple[int, int]]], stride: int, base: int) -> None:
    """Ids packed closely (counted in place) and spread far apart (sorted) alike."""
    postings: dict[str, list[tuple[str, int]]] = {}
    for t, plist in enumerate(terms):
        by_doc = dict(plist)  # one posting per memory and term
        postings[f"t{t}"] = [(str(base + d * stride), tf) for d, tf in sorted(by_doc.items())]
    lengths = {d: 3 + int(d) % 11 for plist in postings.values() for d, _ in plist}
    avg = sum(lengths.values()) / max(len(lengths), 1)
    arrays = {t: _arrays(p, lengths) for t, p in postings.items()}
    query = [*[f"t{t}" for t in range(len(terms))][::-1], "t0", "absent"]
    expected = bm25(query, postings, lengths, 50, avg)
    ids, scores = bm25_arrays(query, arrays, 50, avg)
    assert [str(i) for i in ids.tolist()] == list(expected)
    assert scores.tolist() == list(expected.values())


def _same(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> bool:
    return a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["search", "grow", "replace", "stats", "clear"]),
                          st.integers(0, 5), st.integers(1, 3)), min_size=1, max_size=25),
       st.integers(0, 2**32 - 1))
def test_kept_parts_give_the_scores_computed_anew(
        steps: list[tuple[str, int, int]], seed: int) -> None:
    """Searches between changes of the postings (grown, as a refresh appends; replaced
    by equal arrays; let go) and of the statistics (documents, average length, k1):
    every search with the kept parts scores as one computing everything anew."""
    rng = np.random.default_rng(seed)

    def arrays(n: int) -> PostingArrays:
        ids = np.sort(rng.choice(400, size=n, replace=False)).astype(np.int64)
        return ids, rng.integers(1, 4, n).astype(np.float64), rng.integers(3, 20, n).astype(
            np.float64)

    postings = {f"t{i}": arrays(int(rng.integers(1, 60))) for i in range(6)}
    kept = KeptParts()
    n_docs, avg, k1 = 400, 9.0, 1.2
    for step, term, size in steps:
        name = f"t{term}"
        if step == "grow":
            ids, tf, dl = postings[name]
            more = np.arange(400 + 10 * size, 400 + 11 * size, dtype=np.int64)
            postings[name] = (np.concatenate([ids, more]), np.concatenate([tf, np.ones(size)]),
                              np.concatenate([dl, np.full(size, 5.0)]))
            n_docs += size
        elif step == "replace":
            postings[name] = tuple(a.copy() for a in postings[name])  # type: ignore[assignment]
        elif step == "stats":
            avg, k1 = avg + size / 7, (1.2, 1.5, 0.9)[size - 1]
        elif step == "clear":
            kept.clear()
        query = [f"t{(term + j) % 6}" for j in range(size)]
        got = bm25_arrays(query, postings, n_docs, avg, k1=k1, kept=kept)
        assert _same(got, bm25_arrays(query, postings, n_docs, avg, k1=k1))
    assert len(kept) <= len(postings)


def test_parts_are_taken_from_those_kept_while_they_hold() -> None:
    """The second search of the same postings and statistics reads the kept parts (the
    very same array); other statistics compute them anew."""
    p = (np.array([1, 5, 9], np.int64), np.array([1.0, 2.0, 1.0]), np.array([4.0, 8.0, 6.0]))
    kept = KeptParts()
    first = kept.parts_of("x", p, 10, 6.0, 1.2, 0.75)
    assert kept.parts_of("x", p, 10, 6.0, 1.2, 0.75)[0] is first[0]
    assert first[1:] == (1, 9)
    assert kept.parts_of("x", p, 11, 6.0, 1.2, 0.75)[0] is not first[0]
    assert kept.parts_of("x", tuple(a.copy() for a in p), 11, 6.0, 1.2,  # type: ignore[arg-type]
                           0.75)[0] is not first[0]
