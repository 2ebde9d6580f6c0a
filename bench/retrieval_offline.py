"""Offline evaluation of memstream's long-term retrieval on LoCoMo.

Every turn of every conversation becomes an episodic memory (``Speaker:
text``, dated with its session, source id ``<sample_id>:<dia_id>``); every
question of categories 1-4 is asked against its own conversation with the
same pure ranking code the built-in provider runs (BM25, dense cosine,
fusion, MMR, the date lift of the query engine, budget packing) — in memory,
no database or broker needed. The defaults are the shipped ones.

Reported, overall and per category: evidence recall@5/@10/@20 (the share of a
question's evidence turns among the first k results) and b4k, the share that
ends up inside the 4,000-token long-memory budget (``pack_budget``), for
lexical only, dense only and hybrid retrieval, with per-query latency.

    .venv/bin/python bench/retrieval_offline.py --data ../shared/bench/locomo-dev.json
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streams.devtools.locomo.dataset import CATEGORIES, parse_date, parse_evidence  # noqa: E402
from streams.memory.model import USER_CUBE, StoredMemory, agent_cube  # noqa: E402
from streams.memory.rules.dates import DATE_LIFT, DATE_SLACK_DAYS, lift_dated, named_periods  # noqa: E402
from streams.memory.rules.fusion import (  # noqa: E402
    FusionWeights,
    Position,
    Ramp,
    confidence,
    fuse,
    speaker_of,
)
from streams.memory.rules.lexical import (  # noqa: E402
    bm25,
    holds_specific,
    idf,
    matched_share,
    query_terms,
    term_counts,
    tokenize,
)
from streams.memory.rules.mmr import Scored, mmr  # noqa: E402
from streams.memory.rules.recency import (  # noqa: E402
    Recency,
    announces_change,
    newer_first,
    value_signature,
)
from streams.query.rules.budget import filter_and_trim, pack_budget  # noqa: E402
from streams.tokens import TokenCounter  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "bench" / "locomo-dev.json"
MODES = ("lexical", "dense", "hybrid")


@dataclass
class Conversation:
    """One sample's turns as memories, with its lexical and dense index."""

    sample_id: str
    memories: list[StoredMemory] = field(default_factory=list)
    positions: dict[str, Position] = field(default_factory=dict)
    postings: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    doc_len: dict[str, int] = field(default_factory=dict)
    vectors: np.ndarray | None = None

    @property
    def avg_len(self) -> float:
        return sum(self.doc_len.values()) / max(len(self.doc_len), 1)

    def index(self, memory: StoredMemory) -> None:
        terms = tokenize(memory.content)
        self.doc_len[memory.id] = len(terms)
        for term, tf in term_counts(terms).items():
            self.postings.setdefault(term, []).append((memory.id, tf))


def load(path: Path, cube: str, kind: str = "episode",
         ) -> tuple[list[Conversation], list[dict[str, Any]]]:
    data = json.loads(path.read_text())
    convs: list[Conversation] = []
    questions: list[dict[str, Any]] = []
    for sample in data:
        sid = str(sample.get("sample_id", f"sample{len(convs)}"))
        conv = Conversation(sid)
        talk = sample.get("conversation", {})
        keys = [k for k, v in talk.items()
                if re.fullmatch(r"session_\d+", k) and isinstance(v, list)]
        for key in sorted(keys, key=lambda k: int(k.split("_")[1])):
            when = parse_date(talk.get(f"{key}_date_time"))
            for seq, turn in enumerate(talk[key]):
                dia = str(turn.get("dia_id", f"{key}:{seq}"))
                content = f"{turn.get('speaker', '?')}: {turn.get('text', '')}"
                mem = StoredMemory(
                    id=f"{sid}:{dia}", content=content, cube=cube,
                    kind="fact" if kind == "fact" else "episode",
                    event_time=when, source_event_ids=(f"{sid}:{dia}",),
                    metadata={"session": f"{sid}:{key}", "seq": seq},
                )
                conv.memories.append(mem)
                conv.positions[mem.id] = Position(f"{sid}:{key}", seq, speaker_of(content))
                conv.index(mem)
        convs.append(conv)
        for qa in sample.get("qa", []):
            if qa.get("category") in CATEGORIES:
                ev = [f"{sid}:{e}" for e in parse_evidence(qa.get("evidence", []))]
                questions.append({"conv": len(convs) - 1, "question": str(qa.get("question", "")),
                                  "category": qa["category"], "evidence": ev})
    return convs, questions


def cube_confidence(conv: Conversation, question: str, lexical: dict[str, float],
                    dense: dict[str, float] | None, ramp: Ramp = Ramp()) -> float:  # noqa: B008
    """The conversation's :func:`confidence` for the question, as the provider takes it."""
    words = list(dict.fromkeys(query_terms(question)))
    share, specific = 0.0, False
    if lexical:
        best = max(lexical, key=lexical.__getitem__)
        holds = [any(d == best for d, _ in conv.postings.get(t, ())) for t in words]
        share, specific = matched_share(holds), holds_specific(words, holds)
    return confidence(max(dense.values()) if dense else None, share, ramp, specific=specific)


def updates_first(conv: Conversation, question: str, scores: dict[str, float],
                  rule: Recency = Recency(), floor: float = 0.3) -> dict[str, float]:  # noqa: B008
    """:func:`newer_first` over the conversation's best memories, as the provider does (its
    floor: the query's 0.3, where the reply's memories are cut)."""
    if rule.depth < 2 or len(scores) < 2:
        return scores
    words = list(dict.fromkeys(query_terms(question)))
    if not words:
        return scores
    top = sorted(scores, key=lambda k: scores[k], reverse=True)[:rule.depth]
    by_id = {m.id: m for m in conv.memories if m.id in set(top)}
    holders = {t: {d for d, _ in conv.postings.get(t, ())} for t in words}
    new = newer_first(
        np.array([scores[k] for k in top]),
        np.array([by_id[k].event_time.timestamp() if by_id[k].event_time else np.nan
                  for k in top]),
        np.array([announces_change(by_id[k].content) for k in top]),
        np.array([value_signature(by_id[k].content) for k in top], dtype=np.int64),
        np.array([[k in holders[t] for t in words] for k in top]),
        np.array([idf(len(conv.doc_len), len(holders[t])) for t in words]), rule, floor=floor)
    return scores | dict(zip(top, new.tolist(), strict=True))


def rank(conv: Conversation, question: str, qvec: np.ndarray | None, mode: str,
         weights: FusionWeights, limit: int) -> dict[str, float]:
    lexical: dict[str, float] = {}
    if mode in ("lexical", "hybrid"):
        lexical = bm25(query_terms(question), conv.postings, conv.doc_len,
                       len(conv.doc_len), conv.avg_len)
    dense: dict[str, float] | None = None
    if mode in ("dense", "hybrid") and qvec is not None and conv.vectors is not None:
        sims = conv.vectors @ qvec
        dense = {m.id: float(s) for m, s in zip(conv.memories, sims, strict=True)}
    top = cube_confidence(conv, question, lexical, dense)
    if mode == "dense":
        lexical, dense = dense or {}, None
        weights = FusionWeights(0.0, 1.0, weights.neighbour, weights.session, weights.person)
    fused = fuse(lexical, dense, conv.positions, query=question, weights=weights, limit=limit,
                 top_score=top)
    return updates_first(conv, question, fused)


def evaluate(convs: list[Conversation], questions: list[dict[str, Any]], qvecs: np.ndarray | None,
             mode: str, args: argparse.Namespace, count: TokenCounter) -> dict[str, Any]:
    weights = FusionWeights(args.w_dense, 1 - args.w_dense, args.w_neighbour, args.w_session,
                            args.w_person)
    hits: dict[str, list[float]] = defaultdict(list)
    per_cat: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    latencies: list[float] = []
    for qi, q in enumerate(questions):
        if not q["evidence"]:
            continue
        conv = convs[q["conv"]]
        by_id = {m.id: m for m in conv.memories}
        t0 = time.perf_counter()
        qvec = qvecs[qi] if qvecs is not None else None
        scores = rank(conv, q["question"], qvec, mode, weights, args.candidates)
        top = sorted(scores, key=lambda k: scores[k], reverse=True)[: args.top_k]
        items = [Scored(by_id[k], scores[k], by_id[k].content) for k in top]
        if args.mmr_lambda < 1:
            items = mmr(items, len(items), lambda_=args.mmr_lambda)
        ranked = lift_dated([replace(it.item, score=it.score) for it in items],
                            named_periods(q["question"]), weight=args.date_lift,
                            slack_days=args.date_slack_days)
        kept = filter_and_trim(ranked, min_score=args.min_score)
        packed = pack_budget(kept, budget_tokens=args.budget, user_share=args.user_share,
                             count=count)
        latencies.append((time.perf_counter() - t0) * 1000)
        ev = set(q["evidence"])
        order = [m.id for m in ranked]
        row = {f"recall_at_{k}": len(ev & set(order[:k])) / len(ev) for k in (5, 10, 20)}
        row["b4k"] = len(ev & {m.id for m in packed.included}) / len(ev)
        row["packed"] = len(packed.included)
        for key, val in row.items():
            hits[key].append(val)
            per_cat[q["category"]][key].append(val)
    lat = sorted(latencies)
    return {
        "mode": mode,
        "questions": len(hits["b4k"]),
        **{k: statistics.fmean(v) for k, v in hits.items()},
        "by_category": {CATEGORIES[c]: {k: statistics.fmean(v) for k, v in d.items()}
                        | {"questions": len(d["b4k"])} for c, d in sorted(per_cat.items())},
        "p50_ms": lat[len(lat) // 2] if lat else 0.0,
        "p95_ms": lat[int(len(lat) * 0.95)] if lat else 0.0,
    }


def embed_all(convs: Sequence[Conversation], questions: Sequence[dict[str, Any]],
              model_dir: str | None) -> tuple[np.ndarray, dict[str, float]]:
    from streams.adapters.embeddings.embedders import LocalEmbedder

    emb = LocalEmbedder(model_dir)
    t0 = time.perf_counter()
    emb.load()
    timing = {"load_s": time.perf_counter() - t0}
    texts = [m.content for c in convs for m in c.memories]
    t0 = time.perf_counter()
    matrix = emb.encode(texts)
    timing["docs_per_s"] = len(texts) / (time.perf_counter() - t0)
    start = 0
    for c in convs:
        c.vectors = matrix[start : start + len(c.memories)]
        start += len(c.memories)
    t0 = time.perf_counter()
    qvecs = np.stack([emb.encode([q["question"]])[0] for q in questions])
    timing["query_embed_ms"] = (time.perf_counter() - t0) * 1000 / max(len(questions), 1)
    return qvecs, timing


def table(results: list[dict[str, Any]]) -> str:
    cols = ("recall_at_5", "recall_at_10", "recall_at_20", "b4k")
    lines = [f"{'mode':<8} {'category':<12} {'n':>4} " + " ".join(f"{c:>12}" for c in cols)]
    for r in results:
        rows = [("overall", r), *list(r["by_category"].items())]
        for name, d in rows:
            n = d.get("questions", r["questions"])
            vals = " ".join(f"{100 * d[c]:>11.1f}%" for c in cols)
            lines.append(f"{r['mode']:<8} {name:<12} {n:>4} {vals}")
        lines.append(f"{'':<8} latency p50 {r['p50_ms']:.2f} ms, p95 {r['p95_ms']:.2f} ms "
                     f"(ranking + packing; {r['packed']:.0f} memories packed on average)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--model-dir", default=None, help="sentence-transformers model directory")
    p.add_argument("--budget", type=int, default=4000)
    p.add_argument("--cube", choices=("user", "agent"), default="user",
                   help="cube the turns are stored in (user: at most 60%% of the budget)")
    p.add_argument("--user-share", type=float, default=0.6)
    p.add_argument("--candidates", type=int, default=200,
                   help="best candidates of each signal that enter fusion")
    p.add_argument("--top-k", type=int, default=150, help="results handed to the budget")
    p.add_argument("--mmr-lambda", type=float, default=0.7)
    p.add_argument("--min-score", type=float, default=0.3)
    shipped = FusionWeights()
    p.add_argument("--w-dense", type=float, default=shipped.dense)
    p.add_argument("--w-neighbour", type=float, default=shipped.neighbour)
    p.add_argument("--w-session", type=float, default=shipped.session)
    p.add_argument("--w-person", type=float, default=shipped.person)
    p.add_argument("--date-lift", type=float, default=DATE_LIFT,
                   help="lift of the turns dated in a period the question names (0: off)")
    p.add_argument("--date-slack-days", type=int, default=DATE_SLACK_DAYS)
    p.add_argument("--dated-lines", action="store_true",
                   help="pack every turn on its own dated line instead of session blocks")
    p.add_argument("--json", action="store_true", help="one JSON line per mode")
    args = p.parse_args(argv)

    cube = USER_CUBE if args.cube == "user" else agent_cube("locomo")
    convs, questions = load(args.data, cube, "fact" if args.dated_lines else "episode")
    modes = [m for m in args.modes.split(",") if m in MODES]
    qvecs, timing = None, {}
    if any(m != "lexical" for m in modes):
        qvecs, timing = embed_all(convs, questions, args.model_dir)
    count = TokenCounter()
    results = [evaluate(convs, questions, qvecs, m, args, count) | {"embedding": timing}
               for m in modes]
    if args.json:
        for r in results:
            print(json.dumps(r))
    else:
        print(f"{args.data}: {sum(len(c.memories) for c in convs)} turns, "
              f"{len(questions)} questions (categories 1-4)")
        if timing:
            print(f"embedder: load {timing['load_s']:.2f} s, {timing['docs_per_s']:.0f} turns/s, "
                  f"{timing['query_embed_ms']:.1f} ms per question")
        print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
