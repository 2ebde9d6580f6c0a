"""Lexical analysis and BM25 scoring for the built-in long-term retrieval.

Documents and queries go through the same analysis so that their terms meet:

- text is case-folded; English (and other space-separated) words are cut at
  non-word characters (so ``Caroline's`` gives ``caroline`` and a stopword
  ``s``), stopwords removed, and
  each word reduced by a light, deterministic suffix stemmer (plural and
  ``-ed`` / ``-ing`` forms, after Porter's first step); numbers are kept;
- runs of Han, Kana or Hangul characters, which carry no spaces, become their
  single characters plus every pair of neighbouring characters, so Chinese
  and Japanese text is searchable without a dictionary.

:func:`query_terms` also drops question words (what, when, who, did, ...):
they are in nearly every question and in hardly any memory.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from streams.memo import Memo

_CJK = (
    "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff"
)
_TOKEN = re.compile(rf"([{_CJK}]+)|([^\W_{_CJK}]+)")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOPWORDS = _words(
    """a about above after again against all am an and any are aren as at be because been
    before being below between both but by can cannot could couldn d did didn do does doesn
    doing don down during each few for from further had hadn has hasn have haven having he
    her here hers herself him himself his i if in into is isn it its itself just ll m me
    more most mustn my myself no nor not now o of off on once only or other ought our ours
    ourselves out over own re s same shan she should shouldn so some such t than that the
    their theirs them themselves then there these they this those through to too under until
    up ve very was wasn we were weren while with won would wouldn y you your yours yourself
    yourselves also oh yeah yes hey hi ok okay really"""
)

QUESTION_WORDS = _words(
    """what when where who whom whose which why how whats whens wheres whos hows
    kind sort type ever much many"""
)

EVERYDAY_WORDS = _words(
    """time day week month year today tomorrow yesterday morning night thing things way lot
    people person place part point fact case work make take get go come know think see look
    want need use find give tell say ask try call feel seem leave put mean keep let begin
    help talk turn start show hear play run move live believe bring happen write provide sit
    stand lose pay meet include continue set learn change lead understand watch follow stop
    create speak read allow add spend grow open walk win offer remember love like consider
    appear buy wait serve send expect build stay fall cut reach remain suggest raise pass
    require report decide pull good new first last long great little old right big high
    different small large next early young important few bad same able best better sure
    free real full whole hard true clear certain easy simple quick nice fine well lot
    something anything everything nothing someone anyone everyone question answer idea
    problem issue information example plan project thing stuff kind sort number way end
    back side home world life hand area group company system program government family
    story fact month order level line name moment reason result team word business course
    job point house night water room mother area money""")
"""Words of everyday talk: a memory sharing only these with a query is weak evidence
that it holds what the query asks (:func:`specific_terms`)."""


def _is_vowel(s: str, i: int) -> bool:
    """Porter's vowel: a, e, i, o, u, and y after a consonant."""
    c = s[i]
    if c in "aeiou":
        return True
    return c == "y" and i > 0 and not _is_vowel(s, i - 1)


def _has_vowel(s: str) -> bool:
    return any(_is_vowel(s, i) for i in range(len(s)))


def _measure(s: str) -> int:
    """Porter's m: the number of vowel-consonant sequences."""
    flags = [_is_vowel(s, i) for i in range(len(s))]
    return sum(1 for a, b in itertools.pairwise(flags) if a and not b)


def _cvc(s: str) -> bool:
    """Ends consonant-vowel-consonant, the last not w, x or y (``hop``, ``writ``)."""
    if len(s) < 3:
        return False
    n = len(s)
    return (
        not _is_vowel(s, n - 3) and _is_vowel(s, n - 2) and not _is_vowel(s, n - 1)
        and s[-1] not in "wxy"
    )


def _stem(word: str) -> str:
    """A light stemmer: ``paintings`` -> ``paint``, ``hoped`` -> ``hope``, ``cities`` -> ``city``.

    Words of up to three letters and anything containing a digit stay as they are.
    """
    w = word
    if len(w) <= 3 or not w.isalpha():
        return w
    if w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("ies"):
        w = w[:-3] + "y"
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix in ("ing", "ed"):
        if w.endswith("eed"):
            if _measure(w[:-3]) > 0:
                w = w[:-1]
            break
        if w.endswith(suffix) and len(w) - len(suffix) >= 2 and _has_vowel(w[: -len(suffix)]):
            w = w[: -len(suffix)]
            if w.endswith(("at", "bl", "iz")):
                w += "e"
            elif len(w) >= 2 and w[-1] == w[-2] and w[-1] not in "lsz":
                w = w[:-1]
            elif _measure(w) == 1 and _cvc(w):
                w += "e"
            break
    if w.endswith("y") and len(w) > 3 and not _is_vowel(w, len(w) - 2):
        w = w[:-1] + "i"
    if w.endswith("e") and len(w) > 3:
        m = _measure(w[:-1])
        if m > 1 or (m == 1 and not _cvc(w[:-1])):
            w = w[:-1]
    return w


stem = Memo(_stem, 65_536)
""":func:`_stem` memoised: a scope's memories are tokenized when a worker loads it, and
words repeat."""


def _cjk_grams(run: str) -> Iterable[str]:
    yield from run
    for i in range(len(run) - 1):
        yield run[i : i + 2]


def tokenize(text: str) -> list[str]:
    """Index terms of a document, in order, with repetitions."""
    out: list[str] = []
    for cjk, word in _TOKEN.findall(text.casefold()):
        if cjk:
            out.extend(_cjk_grams(cjk))
            continue
        if word not in STOPWORDS:
            out.append(stem(word))
    return out


def query_terms(text: str) -> list[str]:
    """Search terms of a question: :func:`tokenize` without question words, each once."""
    seen: dict[str, None] = {}
    for cjk, word in _TOKEN.findall(text.casefold()):
        if cjk:
            for g in _cjk_grams(cjk):
                seen.setdefault(g, None)
            continue
        if word not in STOPWORDS and word not in QUESTION_WORDS:
            seen.setdefault(stem(word), None)
    return list(seen)


def term_counts(terms: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for t in terms:
        counts[t] = counts.get(t, 0) + 1
    return counts


def bm25(
    query_terms: Sequence[str],
    postings: Mapping[str, Sequence[tuple[str, int]]],
    doc_len: Mapping[str, int],
    n_docs: int,
    avg_len: float,
    *,
    k1: float = 1.2,
    b: float = 0.75,
) -> dict[str, float]:
    """Okapi BM25 of every document that holds at least one query term.

    ``postings`` maps a term to its ``(doc_id, term frequency)`` pairs; the
    document frequency of a term is the number of its postings. ``n_docs`` and
    ``avg_len`` describe the whole collection searched (not just the hits).
    Uses the non-negative idf ``ln(1 + (N - df + 0.5) / (df + 0.5))``.
    """
    scores: dict[str, float] = {}
    n = max(n_docs, 1)
    avg = avg_len if avg_len > 0 else 1.0
    for term in dict.fromkeys(query_terms):
        plist = postings.get(term)
        if not plist:
            continue
        df = len(plist)
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        for doc_id, tf in plist:
            dl = doc_len.get(doc_id, avg)
            denom = tf + k1 * (1.0 - b + b * dl / avg)
            scores[doc_id] = scores.get(doc_id, 0.0) + idf * tf * (k1 + 1.0) / denom
    return scores


DENSE_SPAN = 16  # bm25_arrays: ids within 16 times their number are counted in place, not sorted
PostingArrays = tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64]]
"""A term's postings as arrays: memory ids (ascending), term frequencies, lengths."""


class KeptParts:
    """Each term's BM25 parts (a posting's share of its memory's score) and id range,
    as :func:`bm25_arrays` computes them, kept while the term's postings (the very same
    arrays) and what the parts depend on (documents, average length, ``k1``, ``b``)
    stay the same: searches ask again and again for the common terms, whose postings
    are the longest. One entry a term: 8 bytes a posting and about 300 bytes more.
    Whoever changes the postings :meth:`clear` s it (an entry of other postings is
    never used, only held until then)."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: dict[str, tuple[PostingArrays, tuple[int, float, float, float],
                                     npt.NDArray[np.float64], int, int]] = {}

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        self._items.clear()

    def parts_of(self, term: str, p: PostingArrays, n: int, avg: float, k1: float, b: float,
                 ) -> tuple[npt.NDArray[np.float64], int, int]:
        """The parts of ``p``, the postings of ``term``, and their lowest and highest id:
        kept ones when they hold, else computed and kept."""
        entry = self._items.get(term)
        if entry is not None and entry[0] is p and entry[1] == (n, avg, k1, b):
            return entry[2], entry[3], entry[4]
        got = _parts_of(p, n, avg, k1, b)
        self._items[term] = (p, (n, avg, k1, b), *got)
        return got


def _parts_of(p: PostingArrays, n: int, avg: float, k1: float, b: float,
              df: int | None = None) -> tuple[npt.NDArray[np.float64], int, int]:
    doc_ids, tf, dl = p
    df = len(doc_ids) if df is None else max(df, len(doc_ids))
    idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
    denom = tf + k1 * (1.0 - b + b * dl / avg)
    # the lowest and highest id: (in whatever order a term's postings are)
    return idf * tf * (k1 + 1.0) / denom, int(doc_ids.min()), int(doc_ids.max())


def bm25_arrays(
    query_terms: Sequence[str],
    postings: Mapping[str, PostingArrays],
    n_docs: int,
    avg_len: float,
    *,
    k1: float = 1.2,
    b: float = 0.75,
    kept: KeptParts | None = None,
    df: Mapping[str, int] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """:func:`bm25` over posting arrays: the same scores, bit for bit, as ``(ids, scores)``
    in the order :func:`bm25`'s dict has them (query-term order, then ascending id);
    the terms' parts taken from ``kept`` while they hold there. A term's postings name
    an id once (the index's key is the term and the memory). ``df``: the document
    frequency of a term whose postings are only a part of its own (else their number)."""
    n = max(n_docs, 1)
    avg = avg_len if avg_len > 0 else 1.0
    ids: list[npt.NDArray[np.int64]] = []
    parts: list[npt.NDArray[np.float64]] = []
    firsts: list[int] = []
    lasts: list[int] = []
    for term in dict.fromkeys(query_terms):
        p = postings.get(term)
        if p is None or not len(p[0]):
            continue
        part, first, last = (_parts_of(p, n, avg, k1, b, None if df is None else df.get(term))
                             if kept is None or (df is not None and term in df)
                             else kept.parts_of(term, p, n, avg, k1, b))
        ids.append(p[0])
        parts.append(part)
        firsts.append(first)
        lasts.append(last)
    if not ids:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    lo = min(firsts)
    span = max(lasts) - lo + 1
    if span <= DENSE_SPAN * sum(map(len, ids)):
        # ids packed closely (a scope's memories mostly are): one slot per possible id
        # instead of sorting. bincount adds each term's part in the order given, from
        # 0.0, as the dict does; an id is listed under the first term naming it (a
        # table of the ids seen so far), in that term's order
        at = [a - lo for a in ids]
        slots = np.asarray(np.bincount(np.concatenate(at), weights=np.concatenate(parts),
                                       minlength=span), dtype=np.float64)
        if len(ids) == 1:
            return ids[0].copy(), slots[at[0]]
        seen = np.zeros(span, dtype=bool)
        found: list[npt.NDArray[np.int64]] = []
        for a, o in zip(ids, at, strict=True):
            found.append(a[~seen[o]])
            seen[o] = True
        every_found = np.concatenate(found)
        return every_found, slots[every_found - lo]
    every = np.concatenate(ids)
    uniq, first_at, inverse = np.unique(every, return_index=True, return_inverse=True)
    scores = np.asarray(np.bincount(inverse, weights=np.concatenate(parts),
                                    minlength=len(uniq)), dtype=np.float64)
    order = np.argsort(first_at, kind="stable")
    return uniq[order], scores[order]


_COMMON_HAN = frozenset("我你他她它们的是了在有不这那个一也就都和要会说")


def specific_terms(terms: Iterable[str]) -> frozenset[str]:
    """Of some query terms, those that say what is asked: not everyday words
    (:data:`EVERYDAY_WORDS`, stemmed as the terms are), not a single Han, Kana or
    Hangul character, not a pair of the most common Han characters."""
    out = set()
    for t in terms:
        if _CJK_ONLY.fullmatch(t):
            if len(t) > 1 and not set(t) <= _COMMON_HAN:
                out.add(t)
        elif t not in _EVERYDAY_STEMS:
            out.add(t)
    return frozenset(out)


def idf(n_docs: int, df: int) -> float:
    """BM25's non-negative idf of a term in ``df`` of ``n_docs`` documents (``df`` 0: a
    term no document holds, the rarest possible)."""
    n = max(n_docs, 1)
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def matched_share(held: Sequence[bool]) -> float:
    """The share of a query's (distinct) words a document holds, ``held`` telling for each
    whether it does: 1.0 when it holds every one, 0.0 when none (or the query has no
    words). Not weighed by idf: in a small scope (an agent's few lessons) idf says
    little, and a word the scope lacks would weigh the most."""
    return sum(1 for h in held if h) / len(held) if held else 0.0


def holds_specific(terms: Sequence[str], held: Sequence[bool]) -> bool:
    """Whether a document holds one of the query's words ``terms`` that says what is
    asked (:func:`specific_terms`: "vegetarian", not "time")."""
    wanted = specific_terms(terms)
    return any(h and t in wanted for t, h in zip(terms, held, strict=True))


_CJK_ONLY = re.compile(rf"[{_CJK}]+")
_EVERYDAY_STEMS = frozenset(stem(w) for w in EVERYDAY_WORDS) | EVERYDAY_WORDS
