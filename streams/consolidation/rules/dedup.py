"""Duplicate detection for memory texts, and local dedup inside one candidate batch.

Texts are compared after :func:`normalize` (NFKC, casefold, punctuation to
spaces, whitespace collapsed). Four rules, tried in this order against every
kept candidate before the next rule is tried:

``exact``        the normalised texts are equal;
``containment``  one normalised text occurs in the other on word boundaries
                 (for Chinese, which has none, as a plain substring);
``jaccard``      Jaccard similarity of the character **bigram** sets ≥ the
                 threshold. Bigrams, not single characters: the character sets
                 of two unrelated English sentences overlap heavily (the same
                 twenty-odd letters), bigrams keep word order and spelling;
                 spaces are part of the bigrams, so word boundaries count;
``levenshtein``  ``1 - distance / max(len)`` ≥ the threshold, only when both
                 normalised texts are at most ``short_len`` characters (on long
                 texts edit distance is slow and says little).

A duplicate is merged into the candidate that stays: the longer (more
informative) text wins, on a tie the earlier one; source event ids are united,
importance is the maximum and the event time the newest. Candidates of
different scopes are never merged (they belong to different cubes), nor are
texts spoken by different named speakers (``"Caroline: …"`` vs ``"Melanie: …"``),
nor candidates of different owners (``owner``: the user a group chat's candidate
is attributed to: ``"I'm 25"`` and ``"I'm 39"`` said by two people are two facts,
each of its own speaker's cube).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Literal

from rapidfuzz.distance import Levenshtein

from streams.memory.model import MemoryCandidate

Rule = Literal["exact", "containment", "jaccard", "levenshtein"]
RULES: tuple[Rule, ...] = ("exact", "containment", "jaccard", "levenshtein")

_NAME_WORD = r"(?:[A-Z\u00c0-\u00de][\w.'-]*|[\u4e00-\u9fff]{1,4})"
_SPEAKER = re.compile(rf"^\s*(?P<name>{_NAME_WORD}(?: {_NAME_WORD}){{0,2}})\s*(?::\s+|：\s*)")


def split_speaker(text: str) -> tuple[str | None, str]:
    """``("Caroline", "I went …")`` for ``"Caroline: I went …"``; ``(None, text)`` otherwise.

    A speaker is one to three capitalised words, or one to four Chinese characters,
    before a colon.
    """
    m = _SPEAKER.match(text)
    if not m or not text[m.end() :].strip():
        return None, text
    return m.group("name"), text[m.end() :]


@lru_cache(maxsize=4096)
def normalize(text: str) -> str:
    out = []
    for ch in unicodedata.normalize("NFKC", text).casefold():
        if ch in "'’":
            continue
        out.append(" " if unicodedata.category(ch).startswith("P") else ch)
    return " ".join("".join(out).split())


def bigrams(normalized: str) -> frozenset[str]:
    if len(normalized) < 2:
        return frozenset({normalized}) if normalized else frozenset()
    return frozenset(normalized[i : i + 2] for i in range(len(normalized) - 1))


def jaccard_similarity(a: str, b: str) -> float:
    """Jaccard similarity of the character bigram sets of two texts (normalised first)."""
    sa, sb = bigrams(normalize(a)), bigrams(normalize(b))
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def levenshtein(a: str, b: str, max_distance: int | None = None) -> int:
    """Edit distance (unit costs, over code points); ``max_distance + 1`` once it must
    exceed ``max_distance`` (RapidFuzz's, which stops early as well)."""
    if max_distance is not None and max_distance < 0:  # a threshold above 1
        return 0 if a == b else max_distance + 1
    return int(Levenshtein.distance(a, b, score_cutoff=max_distance))


def levenshtein_similarity(a: str, b: str, min_similarity: float = 0.0) -> float:
    """``1 - distance / max_len`` of two normalised texts.

    Exact when the result is ≥ ``min_similarity``; below it, the early exit
    returns some value under ``min_similarity``.
    """
    longest = max(len(a), len(b))
    if longest == 0:
        return 1.0
    allowed = math.floor(longest * (1 - min_similarity) + 1e-9)
    return (longest - levenshtein(a, b, allowed)) / longest


def contains(outer: str, inner: str) -> bool:
    """Normalised ``inner`` occurs in normalised ``outer`` on word boundaries."""
    if not inner:
        return False
    if f" {inner} " in f" {outer} ":
        return True
    return any("\u4e00" <= ch <= "\u9fff" for ch in inner) and inner in outer


def similarity(a: str, b: str, *, short_len: int = 50) -> float:
    """One score in 0..1 for two raw texts: 1.0 when equal after normalising, else the
    bigram Jaccard or, for short texts, the Levenshtein similarity, whichever is higher."""
    na, nb = normalize(a), normalize(b)
    if na == nb:
        return 1.0
    score = jaccard_similarity(na, nb)
    if len(na) <= short_len and len(nb) <= short_len:
        score = max(score, levenshtein_similarity(na, nb))
    return score


def duplicate_rule(
    a: str,
    b: str,
    rule: Rule,
    *,
    jaccard: float = 0.7,
    levenshtein: float = 0.8,
    short_len: int = 50,
) -> bool:
    """Whether raw texts ``a`` and ``b`` are duplicates under one ``rule``."""
    ta, tb = _Text.of(a), _Text.of(b)
    return not ta.speakers_differ(tb) and _matches(ta, tb, rule, jaccard, levenshtein,
                                                    short_len)


@dataclass(frozen=True)
class Dropped:
    candidate: MemoryCandidate
    rule: Rule
    duplicate_of: MemoryCandidate


@dataclass
class DedupResult:
    kept: list[MemoryCandidate] = field(default_factory=list)
    dropped: list[Dropped] = field(default_factory=list)


def merge(keeper: MemoryCandidate, other: MemoryCandidate) -> MemoryCandidate:
    """``keeper`` with ``other``'s source ids, the higher importance and the newer event time."""
    times = [t for t in (keeper.event_time, other.event_time) if t is not None]
    return replace(
        keeper,
        source_event_ids=tuple(dict.fromkeys((*keeper.source_event_ids, *other.source_event_ids))),
        importance=max(keeper.importance, other.importance),
        event_time=max(times, default=None),
    )


@dataclass
class _Text:
    """What the rules compare of one raw text, computed once per text."""

    speaker: str | None  # casefolded
    norm: str
    padded: str  # ``f" {norm} "``, for containment on word boundaries
    chinese: bool  # containment as a plain substring as well
    _grams: frozenset[str] | None = None

    @classmethod
    def of(cls, text: str) -> _Text:
        speaker, norm = split_speaker(text)[0], normalize(text)
        return cls(speaker.casefold() if speaker is not None else None, norm, f" {norm} ",
                   any("\u4e00" <= ch <= "\u9fff" for ch in norm))

    @property
    def grams(self) -> frozenset[str]:
        if self._grams is None:
            self._grams = bigrams(normalize(self.norm))  # as jaccard_similarity takes them
        return self._grams

    def speakers_differ(self, other: _Text) -> bool:
        """Both texts name a speaker, and not the same one."""
        return (self.speaker is not None and other.speaker is not None
                and self.speaker != other.speaker)

    def contains(self, inner: _Text) -> bool:
        """:func:`contains` of the two normalised texts, on the padding made once."""
        return bool(inner.norm) and (inner.padded in self.padded
                                     or (inner.chinese and inner.norm in self.norm))


def _matches(kept: _Text, cand: _Text, rule: Rule, jaccard: float, levenshtein: float,
             short_len: int) -> bool:
    """Whether ``kept`` and ``cand`` are duplicates under ``rule`` (their speakers not
    differing); a Jaccard comparison whose bigram sets differ too much in size to reach
    the threshold is not computed."""
    if rule == "exact":
        return kept.norm == cand.norm
    if rule == "containment":
        return kept.contains(cand) or cand.contains(kept)
    if rule == "jaccard":
        a, b = kept.grams, cand.grams
        if not a and not b:
            return jaccard <= 1.0
        # the shared bigrams are at most the smaller set, the union at least the larger
        if min(len(a), len(b)) / max(len(a), len(b)) < jaccard:
            return False
        return len(a & b) / len(a | b) >= jaccard
    if len(kept.norm) > short_len or len(cand.norm) > short_len:
        return False
    return levenshtein_similarity(kept.norm, cand.norm, levenshtein) >= levenshtein


def dedup_candidates(
    cands: Sequence[MemoryCandidate],
    *,
    jaccard: float = 0.7,
    levenshtein: float = 0.8,
    short_len: int = 50,
    owner: Callable[[MemoryCandidate], str] | None = None,
) -> DedupResult:
    """Keep one candidate per group of duplicates; see the module docstring for the rules.
    ``owner``: whose a candidate is (candidates of different owners are never merged).

    Each candidate is compared with the candidates kept so far of its scope and owner,
    rule by rule (every kept one under a rule before the next rule), and merged into
    the first it duplicates. Each text is normalised once; a Jaccard comparison whose
    bigram sets differ too much in size to reach the threshold is not computed.

    ``dropped[i].duplicate_of`` is the candidate as finally kept (after merging).
    """
    slots: list[MemoryCandidate] = []  # the kept candidates, merged
    texts: list[_Text] = []  # what the rules compare of each slot's text
    originals: list[MemoryCandidate] = []  # each slot's candidate as it came in
    groups: dict[tuple[str, str], list[int]] = {}  # the slots of each scope and owner
    drops: list[tuple[MemoryCandidate, Rule, int]] = []
    for cand in cands:
        mine = owner(cand) if owner is not None else ""
        text = _Text.of(cand.content)
        group = groups.setdefault((cand.scope, mine), [])
        eligible = [i for i in group if not texts[i].speakers_differ(text)]
        match = next(((rule, i) for rule in RULES for i in eligible
                      if _matches(texts[i], text, rule, jaccard, levenshtein, short_len)),
                     None)
        if match is None:
            group.append(len(slots))
            slots.append(cand)
            texts.append(text)
            originals.append(cand)
            continue
        rule, i = match
        if len(text.norm) > len(texts[i].norm):
            drops.append((originals[i], rule, i))
            slots[i], originals[i], texts[i] = merge(cand, slots[i]), cand, text
        else:
            drops.append((cand, rule, i))
            slots[i] = merge(slots[i], cand)
    dropped = [Dropped(candidate=c, rule=r, duplicate_of=slots[i]) for c, r, i in drops]
    return DedupResult(kept=slots, dropped=dropped)


def drop_covered_by_episodes(
    cands: Sequence[MemoryCandidate], episodes: Sequence[MemoryCandidate]
) -> DedupResult:
    """Drop episodic candidates that restate part of a message already kept as episodes.

    When a provider stores every chat message as an episode (or as passages, each an
    episode), a judged episode candidate (an event sentence) of the same single
    message whose text, speaker aside, occurs in that message's episode, or in one of
    its passages, would only be the same turn twice (rule ``containment``). Facts
    stay: they are typed, and conflicts are checked on them.
    """
    parts: dict[tuple[str, ...], list[tuple[MemoryCandidate, str]]] = {}  # a message's
    for e in episodes:  # episodes, each with its text as compared
        parts.setdefault(e.source_event_ids, []).append(
            (e, normalize(split_speaker(e.content)[1])))
    out = DedupResult()
    for cand in cands:
        turn = None
        if cand.kind == "episode" and cand.source_event_ids in parts:
            said = normalize(split_speaker(cand.content)[1])
            turn = next((e for e, text in parts[cand.source_event_ids]
                         if contains(text, said)), None)
        if turn is not None:
            out.dropped.append(Dropped(candidate=cand, rule="containment", duplicate_of=turn))
        else:
            out.kept.append(cand)
    return out
