"""The grid of the LoCoMo rotation: every configuration's figures on every question.

The ranking is the built-in provider's, step for step, with the shipped pure
rules (``streams/memory/rules``, ``streams/query/rules``): BM25 and MiniLM
cosine fused (``fuse``), the relativity floor, a pool of ``max(3n, n + 20)``
for MMR on the vectors choosing ``n`` = 150 (``query.candidate_pool``), the
0.3 score filter, then ``pack_budget`` with ``user_profile``'s 60 %. Every
turn is an episodic memory of ``user_profile`` (see bench/retrieval_offline.py).

:func:`table` computes, once, one row of figures (recall@5/10/20, b4k, turns
packed) per question and configuration; the rotation (bench/rotation.py) only
reads it. Grid points sharing one fusion are computed together, in worker
processes, and cached under ``.bench/rotation/`` keyed by the data and the
code that computes them (this file included), so a change of any of them
starts afresh.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.retrieval_offline import (  # noqa: E402
    Conversation,
    cube_confidence,
    load,
    updates_first,
)
from streams.memory.model import USER_CUBE, StoredMemory  # noqa: E402
from streams.memory.rules.dates import Period, lift_dated, named_periods  # noqa: E402
from streams.memory.rules.fusion import FusionWeights, fuse  # noqa: E402
from streams.memory.rules.lexical import bm25, query_terms  # noqa: E402
from streams.memory.rules.mmr import mmr_order  # noqa: E402
from streams.query.rules.budget import filter_and_trim, pack_budget  # noqa: E402
from streams.tokens import TokenCounter  # noqa: E402

METRICS = ("recall_at_5", "recall_at_10", "recall_at_20", "b4k", "packed")
POOL = 150  # query.candidate_pool: results handed to the budget
CANDIDATES = 200  # the provider's best candidates of each signal
MIN_SCORE = 0.3  # query.min_score
BUDGET = 4000
USER_SHARE = 0.6
CODE = ("bench/rotation_grid.py", "bench/retrieval_offline.py",
        "streams/memory/rules/fusion.py", "streams/memory/rules/lexical.py",
        "streams/memory/rules/mmr.py", "streams/memory/rules/dates.py",
        "streams/memory/rules/recency.py",
        "streams/query/rules/budget.py", "streams/tokens.py")


@dataclass(frozen=True)
class Params:
    """One point of the grid: what the rotation chooses."""

    dense: float = 0.7  # the lexical weight is 1 - dense
    neighbour: float = 0.3
    session: float = 0.1
    person: float = 0.05
    relativity: float = 0.45
    mmr_lambda: float = 0.7
    date_weight: float = 0.0  # lift of memories dated in a period the query names
    date_slack: int = 0  # ... or up to this many days after it

    def weights(self) -> FusionWeights:
        return FusionWeights(self.dense, round(1 - self.dense, 6), self.neighbour,
                             self.session, self.person)

    def fusion_key(self) -> tuple[Any, ...]:
        """What the fused scores depend on (the rest acts after fusion)."""
        return (self.dense, self.neighbour, self.session, self.person)

    def undated(self) -> Params:
        """This point without the date lift."""
        return replace(self, date_weight=0.0, date_slack=0)


# ------------------------------------------------------------------ data
@dataclass
class Prepared:
    convs: list[Conversation]
    questions: list[dict[str, Any]]
    cosines: list[np.ndarray]  # each conversation's pairwise cosine matrix
    index: list[dict[str, int]]  # memory id -> row, per conversation
    dense: list[dict[str, float]]  # per question: cosine of every memory of its conversation
    periods: list[list[Period]]  # per question: the periods it names


def data_digest(data: Path) -> str:
    return hashlib.sha256(data.read_bytes()).hexdigest()[:16]


def vectors(convs: Sequence[Conversation], questions: Sequence[dict[str, Any]], data: Path,
            ) -> tuple[list[np.ndarray], np.ndarray]:
    """MiniLM vectors of every turn and question, cached under .bench/ by the file's hash."""
    cache = ROOT / ".bench" / f"locomo-vectors-{data_digest(data)}.npz"
    if cache.exists():
        saved = np.load(cache)
        docs, qvecs = saved["docs"], saved["questions"]
    else:
        from streams.adapters.embeddings.embedders import LocalEmbedder

        emb = LocalEmbedder(None)
        emb.load()
        docs = emb.encode([m.content for c in convs for m in c.memories])
        qvecs = np.stack([emb.encode([q["question"]])[0] for q in questions])
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache, docs=docs, questions=qvecs)
    out, start = [], 0
    for c in convs:
        out.append(np.asarray(docs[start:start + len(c.memories)], dtype=np.float64))
        start += len(c.memories)
    return out, np.asarray(qvecs, dtype=np.float64)


def prepare(data: Path) -> Prepared:
    convs, questions = load(data, USER_CUBE)
    questions = [q for q in questions if q["evidence"]]  # unscorable ones carry no figure
    docs, qvecs = vectors(convs, questions, data)
    unit = [d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12) for d in docs]
    dense = []
    for q, qv in zip(questions, qvecs, strict=True):
        sims = docs[q["conv"]] @ qv
        dense.append({m.id: float(s)
                      for m, s in zip(convs[q["conv"]].memories, sims, strict=True)})
    return Prepared(convs, questions, [u @ u.T for u in unit],
                    [{m.id: i for i, m in enumerate(c.memories)} for c in convs],
                    dense, [named_periods(q["question"]) for q in questions])


# ------------------------------------------------------------------ one question
def ranked(prep: Prepared, qi: int, p: Params) -> dict[str, float]:
    q = prep.questions[qi]
    c = prep.convs[q["conv"]]
    lexical = bm25(query_terms(q["question"]), c.postings, c.doc_len, len(c.doc_len), c.avg_len)
    top = cube_confidence(c, q["question"], lexical, prep.dense[qi])
    return updates_first(c, q["question"], fuse(
        lexical, prep.dense[qi], c.positions, query=q["question"], weights=p.weights(),
        limit=CANDIDATES, top_score=top))


def with_score(m: StoredMemory, score: float) -> StoredMemory:
    """``replace(m, score=score)`` without the dataclass machinery (a copy of the fields)."""
    out: StoredMemory = object.__new__(StoredMemory)
    out.__dict__.update(m.__dict__)
    out.__dict__["score"] = score
    return out


def by_score(scores: dict[str, float]) -> list[str]:
    return sorted(scores, key=lambda k: scores[k], reverse=True)


def chosen_ids(prep: Prepared, qi: int, scores: dict[str, float], p: Params,
               ordered: Sequence[str]) -> list[str]:
    """The provider's pool above ``relativity`` (``ordered``: by score), MMR's picks of it."""
    ci = prep.questions[qi]["conv"]
    pool = []
    for k in ordered:
        if scores[k] < p.relativity or len(pool) >= max(3 * POOL, POOL + 20):
            break
        pool.append(k)
    if p.mmr_lambda < 1 and len(pool) > POOL:
        rows = [prep.index[ci][k] for k in pool]
        order = mmr_order([scores[k] for k in pool], prep.cosines[ci][np.ix_(rows, rows)],
                          POOL, lambda_=p.mmr_lambda)
        return [pool[i] for i in order]
    return pool[:POOL]


def answer(prep: Prepared, qi: int, scores: dict[str, float], chosen: Sequence[str], p: Params,
           count: Callable[[str], int]) -> list[float]:
    """The engine's steps over the provider's picks (date lift, filter, budget); the figures."""
    q = prep.questions[qi]
    ci = q["conv"]
    memories = prep.convs[ci].memories
    mems = [with_score(memories[prep.index[ci][k]], scores[k]) for k in chosen]
    mems = lift_dated(mems, prep.periods[qi], weight=p.date_weight, slack_days=p.date_slack)
    kept = filter_and_trim(mems, min_score=MIN_SCORE)
    packed = pack_budget(kept, budget_tokens=BUDGET, user_share=USER_SHARE, count=count)
    ev = set(q["evidence"])
    order = [m.id for m in kept]
    row = {f"recall_at_{k}": len(ev & set(order[:k])) / len(ev) for k in (5, 10, 20)}
    row["b4k"] = len(ev & {m.id for m in packed.included}) / len(ev)
    row["packed"] = float(len(packed.included))
    return [row[m] for m in METRICS]


# ------------------------------------------------------------------ the table, cached
_PREP: Prepared | None = None
_CACHE: Path | None = None


def cache_dir(data: Path) -> Path:
    h = hashlib.sha256(data_digest(data).encode())
    for name in CODE:
        h.update((ROOT / name).read_bytes())
    return ROOT / ".bench" / "rotation" / h.hexdigest()[:16]


def _load(key: tuple[Any, ...]) -> dict[Params, np.ndarray]:
    """The cached rows of the grid points of one fusion."""
    assert _CACHE is not None
    path = _CACHE / (hashlib.sha256(repr(key).encode()).hexdigest()[:20] + ".npz")
    if not path.exists():
        return {}
    saved = np.load(path)
    return {Params(**d): r for d, r in zip(json.loads(str(saved["params"])), saved["rows"],
                                          strict=True)}


def _save(key: tuple[Any, ...], done: dict[Params, np.ndarray]) -> None:
    assert _CACHE is not None
    path = _CACHE / (hashlib.sha256(repr(key).encode()).hexdigest()[:20] + ".npz")
    every = list(done)
    np.savez(path, params=json.dumps([asdict(p) for p in every]),
             rows=np.stack([done[p] for p in every]))


def _group(job: tuple[Params, list[Params]]) -> np.ndarray:
    """Rows of every question for ``posts`` (grid points sharing ``first``'s fusion).

    A question naming no date gets the row of the grid point without the date lift
    (the lift changes nothing there), copied rather than computed."""
    first, posts = job
    assert _PREP is not None
    done = _load(first.fusion_key())
    missing = [p for p in posts if p not in done]
    if missing:
        count = TokenCounter()  # the worker's: lines counted once, the block from them
        rows = np.zeros((len(missing), len(_PREP.questions), len(METRICS)), dtype=np.float32)
        at = {p: i for i, p in enumerate(missing)}
        for qi in range(len(_PREP.questions)):
            todo, later = [], []
            for pi, p in enumerate(missing):
                u = p.undated()
                if not _PREP.periods[qi] and u != p and u in done:
                    rows[pi, qi] = done[u][qi]
                elif not _PREP.periods[qi] and u != p and u in at:
                    later.append((pi, at[u]))  # once the unlifted point's row is there
                else:
                    todo.append(pi)
            if todo:
                _compute(qi, first, [(pi, missing[pi]) for pi in todo], rows, count)
            for pi, src in later:
                rows[pi, qi] = rows[src, qi]
        done.update(zip(missing, rows, strict=True))
        _save(first.fusion_key(), done)
    return np.stack([done[p] for p in posts])


def _compute(qi: int, fusion: Params, todo: list[tuple[int, Params]], rows: np.ndarray,
             count: Callable[[str], int]) -> None:
    """Question ``qi``'s rows of the points ``todo`` (row index, point), ranked once."""
    assert _PREP is not None
    scores = ranked(_PREP, qi, fusion)
    ordered = by_score(scores)
    picks: dict[tuple[float, float], tuple[str, ...]] = {}
    seen: dict[tuple[Any, ...], list[float]] = {}  # MMR and the lift often change nothing
    for pi, p in todo:
        if (p.relativity, p.mmr_lambda) not in picks:
            picks[(p.relativity, p.mmr_lambda)] = tuple(chosen_ids(_PREP, qi, scores, p, ordered))
        chosen = picks[(p.relativity, p.mmr_lambda)]
        key = (chosen, p.date_weight, p.date_slack) if _PREP.periods[qi] else (chosen,)
        if key not in seen:
            seen[key] = answer(_PREP, qi, scores, chosen, p, count)
        rows[pi, qi] = seen[key]


def table(prep: Prepared, data: Path, configs: Sequence[Params], workers: int,
          progress: Callable[[str], None]) -> dict[Params, np.ndarray]:
    """Every configuration's rows on every question (computed once; folds read from it)."""
    global _PREP, _CACHE
    _PREP, _CACHE = prep, cache_dir(data)
    _CACHE.mkdir(parents=True, exist_ok=True)
    groups: dict[tuple[Any, ...], list[Params]] = {}
    for p in sorted(configs, key=lambda p: p.date_weight > 0):  # the unlifted points first
        groups.setdefault(p.fusion_key(), []).append(p)
    jobs = [(ps[0], ps) for ps in groups.values()]
    result: dict[Params, np.ndarray] = {}
    start = time.monotonic()
    n = 0
    with multiprocessing.get_context("fork").Pool(max(workers, 1)) as pool:
        for (_, posts), rows in zip(jobs, pool.imap(_group, jobs), strict=True):
            result.update(zip(posts, rows, strict=True))
            n += 1
            if n % 10 == 0 or n == len(jobs):
                progress(f"{n}/{len(jobs)} fusion settings, {time.monotonic() - start:.0f} s")
    return result
