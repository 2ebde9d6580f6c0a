"""Scoring LoCoMo answers by evidence recall (pure).

A question's evidence turns are ``D<session>:<turn>`` ids; memstream's event
ids for LoCoMo turns are ``<sample_id>:<dia_id>``, so a memory "finds" a turn
when the turn's event id is among the memory's source events.

* recall@k — the share of the question's evidence turns found by the first k
  memories listed in the reply;
* b4k — the share found by the memories inside the long-memory token budget
  (what actually reaches the model).

A question without a usable evidence id (LoCoMo has a few) is asked and timed
but has no recall to measure: it is counted apart (``unscored``), not as 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from streams.devtools.evidence import share_found
from streams.devtools.locomo.dataset import CATEGORIES, Question

KS = (5, 10, 20)


def event_id(sample_id: str, dia_id: str) -> str:
    return f"{sample_id}:{dia_id}"


def evidence_ids(q: Question) -> list[str]:
    return [event_id(q.sample_id, e) for e in q.evidence]


@dataclass(frozen=True)
class QuestionScore:
    category: int
    recall: dict[int, float]
    b4k: float
    latency_ms: float
    has_evidence: bool = True


def score(q: Question, memory_sources: Sequence[Sequence[str]], budget_sources: Sequence[str],
          latency_ms: float) -> QuestionScore:
    """``memory_sources``: the source event ids of each listed memory, best first."""
    ev = evidence_ids(q)
    recall = {k: share_found(ev, (s for m in memory_sources[:k] for s in m)) for k in KS}
    return QuestionScore(q.category, recall, share_found(ev, budget_sources), latency_ms, bool(ev))


def percentile(values: Sequence[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    lo = int(rank)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


@dataclass
class RecallSummary:
    questions: int
    b4k: float
    recall: dict[int, float]
    by_category: dict[str, dict[str, float]] = field(default_factory=dict)
    p50_ms: float = 0.0
    p95_ms: float = 0.0
    p99_ms: float = 0.0
    unscored: int = 0

    def as_json(self) -> dict[str, object]:
        return {
            "b4k": round(self.b4k, 4),
            "recall_at_5": round(self.recall[5], 4),
            "recall_at_10": round(self.recall[10], 4),
            "recall_at_20": round(self.recall[20], 4),
            "by_category": self.by_category,
            "questions": self.questions,
            "unscored": self.unscored,
            "p50_ms": round(self.p50_ms, 2),
            "p95_ms": round(self.p95_ms, 2),
            "p99_ms": round(self.p99_ms, 2),
        }


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def summarize(asked: Sequence[QuestionScore]) -> RecallSummary:
    """Recall over the questions with evidence; latency over every question asked."""
    lat = [r.latency_ms for r in asked]
    results = [r for r in asked if r.has_evidence]
    s = RecallSummary(
        questions=len(results),
        b4k=_mean([r.b4k for r in results]),
        recall={k: _mean([r.recall[k] for r in results]) for k in KS},
        p50_ms=percentile(lat, 50), p95_ms=percentile(lat, 95), p99_ms=percentile(lat, 99),
        unscored=len(asked) - len(results),
    )
    for cat, name in CATEGORIES.items():
        mine = [r for r in results if r.category == cat]
        if mine:
            s.by_category[name] = {
                "questions": len(mine),
                "b4k": round(_mean([r.b4k for r in mine]), 4),
                **{f"recall_at_{k}": round(_mean([r.recall[k] for r in mine]), 4) for k in KS},
            }
    return s


def render_table(s: RecallSummary) -> str:
    head = f"{'category':<12} {'questions':>9} {'R@5':>7} {'R@10':>7} {'R@20':>7} {'b4k':>7}"
    rows = [head, "-" * len(head)]
    for name, c in s.by_category.items():
        rows.append(f"{name:<12} {c['questions']:>9.0f} {c['recall_at_5']:>7.1%} "
                    f"{c['recall_at_10']:>7.1%} {c['recall_at_20']:>7.1%} {c['b4k']:>7.1%}")
    rows.append("-" * len(head))
    rows.append(f"{'overall':<12} {s.questions:>9} {s.recall[5]:>7.1%} {s.recall[10]:>7.1%} "
                f"{s.recall[20]:>7.1%} {s.b4k:>7.1%}")
    if s.unscored:
        rows.append(f"{s.unscored} question(s) without a usable evidence id: asked, not scored")
    rows.append(f"query latency p50 {s.p50_ms:.1f} ms, p95 {s.p95_ms:.1f} ms, "
                f"p99 {s.p99_ms:.1f} ms")
    return "\n".join(rows)
