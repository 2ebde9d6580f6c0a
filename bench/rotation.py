"""LoCoMo retrieval tuned by leave-one-conversation-out rotation (no services).

For each of the dev file's conversations, the retrieval parameters are chosen
on the other conversations (a grid of a step either side of each value
shipped before this tuning, and beyond; the objective is the mean of recall@10 and
b4k, the evidence share inside the 4,000-token budget) and measured on the
held-out one. Reported: each fold's chosen parameters and held-out figures,
the pooled held-out-by-rotation figures overall and per category, next to the
dev figures (tuned on all five, measured on all five) and the defaults before
this tuning measured on all five. The figures of every configuration come
from bench/rotation_grid.py (computed once, cached).

``--try NAME`` adds a change's parameters to the grid and reports its
rotation next to the rotation without it (a change is kept only if its pooled
held-out figure is better).

    .venv/bin/python bench/rotation.py [--data FILE] [--try NAME ...] [--json]

The figures are recall, not time: they do not depend on the machine's load.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.retrieval_offline import DEFAULT_DATA  # noqa: E402
from bench.rotation_grid import METRICS, Params, Prepared, prepare, table  # noqa: E402
from streams.devtools.locomo.dataset import CATEGORIES  # noqa: E402
from streams.devtools.locomo.rotation import Rotation, Row, rotate, summary, tuned_on_all  # noqa: E402

OBJECTIVE = "(recall_at_10 + b4k) / 2"
BEFORE = Params(dense=0.7, neighbour=0.3, session=0.1, person=0.05, mmr_lambda=0.7)
"""The defaults before this tuning (the build's FusionWeights and MMR then)."""

BASE_GRID: dict[str, tuple[Any, ...]] = {
    "dense": (0.7, 0.6, 0.8),
    "neighbour": (0.3, 0.2, 0.4),
    "session": (0.1, 0.0, 0.2),
    "person": (0.05, 0.0, 0.1),
    "mmr_lambda": (0.7, 1.0),
}
"""Each parameter's values, the one shipped before first (ties go to it), a step either side."""

BEYOND: dict[str, tuple[Any, ...]] = {
    "dense": (0.6, 0.5),
    "neighbour": (0.4, 0.5),
    "session": (0.2, 0.3),
    "person": (0.1, 0.15),
    "mmr_lambda": (0.7, 1.0),
}
"""A step beyond the corner of BASE_GRID every fold chose (0.6, 0.4, 0.2, 0.1): the grid
is the union of the products, so a fold may stop at the corner or go past it."""

FURTHER: dict[str, tuple[Any, ...]] = {
    "dense": (0.6, 0.5),
    "neighbour": (0.4, 0.5),
    "session": (0.3, 0.4),
    "person": (0.15, 0.25),
    "mmr_lambda": (0.7,),
}
"""Further still, where the folds went to the edge of BEYOND (session 0.3, person 0.15)."""

FARTHEST: dict[str, tuple[Any, ...]] = {
    "dense": (0.5, 0.4),
    "neighbour": (0.4, 0.5),
    "session": (0.4, 0.5),
    "person": (0.25, 0.4),
    "mmr_lambda": (0.7,),
}
"""And where they went to the edge of FURTHER (dense 0.5, session 0.4, person 0.25)."""

SHARED_WITH_BEAM: dict[str, tuple[Any, ...]] = {
    "dense": (0.5, 0.6),
    "neighbour": (0.3, 0.4, 0.5),
    "session": (0.4, 0.5),
    "person": (0.25, 0.4),
    "mmr_lambda": (0.7,),
}
"""The weights BEAM's grid tries too (bench/beam_offline.py), for the rotation over both
benchmarks (bench/rotation_joint.py)."""

CHANGES: dict[str, dict[str, tuple[Any, ...]]] = {
    "date-lift": {"date_weight": (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0), "date_slack": (0, 7)},
    "relativity": {"relativity": (0.45, 0.3, 0.2)},
}
"""What each change adds to the grid (its off value first)."""


def grid(*parts: dict[str, tuple[Any, ...]]) -> list[Params]:
    """The union of the products ``parts``, in order, without repeats."""
    out: dict[Params, None] = {}
    for axes in parts:
        names = list(axes)
        for values in itertools.product(*(axes[n] for n in names)):
            p = Params(**dict(zip(names, values, strict=True)))
            if p.date_weight or not p.date_slack:  # no lift: the slack means nothing
                out[p] = None
    return list(out)


def short(p: Params) -> str:
    """The grid's parameters of ``p``, and any other that is not the default."""
    return " ".join(f"{f.name}={getattr(p, f.name)}" for f in fields(p)
                    if f.name in BASE_GRID or getattr(p, f.name) != getattr(BEFORE, f.name))


def by_category(rows: Sequence[Row], cats: Sequence[int]) -> dict[str, dict[str, float]]:
    out = {"overall": summary(rows, METRICS)}
    for c, name in CATEGORIES.items():
        mine = [r for r, k in zip(rows, cats, strict=True) if k == c]
        if mine:
            out[name] = summary(mine, METRICS)
    return out


def objective(s: dict[str, float]) -> float:
    return (s["recall_at_10"] + s["b4k"]) / 2


def run(prep: Prepared, configs: Sequence[Params], rows_of: dict[Params, np.ndarray],
        ) -> dict[str, Any]:
    """The rotation over ``configs``, the dev choice, and the defaults before tuning."""
    groups = [prep.convs[q["conv"]].sample_id for q in prep.questions]
    cats = [int(q["category"]) for q in prep.questions]
    r10, b4k = METRICS.index("recall_at_10"), METRICS.index("b4k")
    obj = {p: (v[:, r10] + v[:, b4k]) / 2 for p, v in rows_of.items()}

    def score(p: Params, idx: Sequence[int]) -> float:
        return float(obj[p][np.asarray(idx)].mean())

    def evaluate(p: Params, idx: Sequence[int]) -> list[Row]:
        v = rows_of[p]
        return [dict(zip(METRICS, v[i].tolist(), strict=True)) for i in idx]

    rot: Rotation[Params] = rotate(configs, groups, score, evaluate)
    held = [r for _, r in rot.held_out_rows()]
    dev_choice, dev_rows = tuned_on_all(configs, groups, score, evaluate)
    before = evaluate(BEFORE, range(len(groups)))
    folds = []
    for f in rot.folds:
        s = summary(f.rows, METRICS)
        mine = list(f.fold.test)
        folds.append({"held_out": f.fold.held_out, "questions": len(f.rows),
                      "chosen": asdict(f.chosen), "train_objective": f.train_objective,
                      "recall_at_10": s["recall_at_10"], "b4k": s["b4k"],
                      "objective": objective(s),
                      "before": summary([before[i] for i in mine], METRICS)})
    held_cat = by_category(held, cats)
    return {
        "configs": len(configs),
        "objective": OBJECTIVE,
        "folds": folds,
        "held_out": held_cat,
        "held_out_objective": objective(held_cat["overall"]),
        "dev": by_category(dev_rows, cats),
        "dev_chosen": asdict(dev_choice),
        "before": by_category(before, cats),
        "per_parameter": {f.name: dict(Counter(str(getattr(x.chosen, f.name))
                                               for x in rot.folds).most_common())
                          for f in fields(Params)},
    }


def pct(x: float) -> str:
    return f"{100 * x:5.1f} %"


def render(name: str, r: dict[str, Any]) -> str:
    lines = [f"== {name}: {r['configs']} configurations, chosen by {r['objective']}",
             "fold (held out)   n  held-out R@10     b4k    before R@10     b4k   "
             "chosen on the other four"]
    for f in r["folds"]:
        s = f["before"]
        lines.append(f"{f['held_out']:<14} {f['questions']:>4}  {pct(f['recall_at_10']):>13} "
                     f"{pct(f['b4k'])}   {pct(s['recall_at_10']):>12} {pct(s['b4k'])}   "
                     f"{short(Params(**f['chosen']))}")
    lines += [f"dev choice (tuned on all five): {short(Params(**r['dev_chosen']))}",
              f"{'category':<12} {'n':>4}   {'held-out R@10':>13} {'b4k':>7}   "
              f"{'dev R@10':>9} {'b4k':>7}   {'before R@10':>12} {'b4k':>7}"]
    for cat, h in r["held_out"].items():
        d, s = r["dev"][cat], r["before"][cat]
        lines.append(f"{cat:<12} {h['questions']:>4.0f}   {pct(h['recall_at_10']):>13} "
                     f"{pct(h['b4k'])}   {pct(d['recall_at_10']):>9} {pct(d['b4k'])}   "
                     f"{pct(s['recall_at_10']):>12} {pct(s['b4k'])}")
    lines.append(f"held-out objective {pct(r['held_out_objective'])}; chosen per parameter "
                 "(folds): " + "; ".join(f"{k} {v}" for k, v in r["per_parameter"].items()
                                         if len(v) > 1 or k in BASE_GRID))
    return "\n".join(lines)


def compare(base: dict[str, Any], other: dict[str, Any]) -> str:
    """The change's held-out effect: pooled, and per fold."""
    d = other["held_out_objective"] - base["held_out_objective"]
    per = [f2["objective"] - f1["objective"] for f1, f2 in zip(base["folds"], other["folds"],
                                                                 strict=True)]
    h1, h2 = base["held_out"]["overall"], other["held_out"]["overall"]
    return (f"held-out objective {d * 100:+.2f} points (R@10 "
            f"{(h2['recall_at_10'] - h1['recall_at_10']) * 100:+.2f}, b4k "
            f"{(h2['b4k'] - h1['b4k']) * 100:+.2f}); per fold "
            + ", ".join(f"{x * 100:+.2f}" for x in per))


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--try", dest="changes", action="append", default=[], choices=list(CHANGES),
                    help="add a change's parameters to the grid (repeatable; together)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", action="store_true", help="one JSON line instead of the table")
    ap.add_argument("--out", type=Path, default=None, help="also write the JSON to this file")
    args = ap.parse_args(list(argv) if argv is not None else None)

    def progress(msg: str) -> None:
        print(f"  {msg}", file=sys.stderr, flush=True)

    prep = prepare(args.data)
    base = grid(BASE_GRID, BEYOND, FURTHER, FARTHEST)
    added: dict[str, tuple[Any, ...]] = {}
    for name in args.changes:
        added |= CHANGES[name]
    configs = grid(*(part | added for part in (BASE_GRID, BEYOND, FURTHER, FARTHEST)))
    progress(f"{len(prep.questions)} questions, {len(configs)} configurations")
    rows = table(prep, args.data, configs, args.workers, progress)
    result = {"base": run(prep, base, rows)}
    if args.changes:
        result["+".join(args.changes)] = run(prep, configs, rows)
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=1))
    if args.json:
        print(json.dumps(result))
    else:
        print("\n\n".join(render(k, v) for k, v in result.items()))
        if args.changes:
            print(f"\n{'+'.join(args.changes)} against base: "
                  + compare(result["base"], result["+".join(args.changes)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
