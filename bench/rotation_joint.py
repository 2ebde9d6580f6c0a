"""Both data shapes in one rotation: the weights LoCoMo and BEAM share, chosen on both.

LoCoMo (two people, short turns) and BEAM (a person and an assistant, long
answers with code) are ranked by the same fusion: the dense weight, neighbour
smoothing, the session boost and the relativity floor are one setting for
both. Each is rotated on its own by ``bench/rotation.py`` (leave one LoCoMo
conversation out) and ``bench/beam_offline.py --grid`` (leave one BEAM chat
out); here the folds are the five LoCoMo conversations and the ten BEAM chats
together. Fold ``i`` holds one conversation or chat out and chooses, on all
the others, the configuration that maximises the mean of the two benchmarks'
objectives (LoCoMo's: mean of recall@10 and b4k; BEAM's: mean of in-budget,
all-found and recall@10), each averaged over its own questions so both count
the same whatever their sizes. A configuration joins a LoCoMo grid point and a
BEAM grid point that agree on every shared weight; the weights only one
benchmark has (the person prior and the date lift: LoCoMo's; the assistant's
weight and the passages' decay: BEAM's) are chosen by the folds with them.

Both grids come from their caches (``.bench/rotation/``, ``.bench/beam-offline/``);
LoCoMo's points of the weights BEAM's grid tries (``SHARED_WITH_BEAM``) are
computed here when they are not cached. Run ``bench/beam_offline.py --grid``
first.

    .venv/bin/python bench/rotation_joint.py [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.beam_offline import DEFAULT_DATA as BEAM_DATA  # noqa: E402
from bench.beam_offline import beam_grid_rows  # noqa: E402
from bench.retrieval_offline import DEFAULT_DATA as LOCOMO_DATA  # noqa: E402
from bench.rotation import (  # noqa: E402
    BASE_GRID,
    BEYOND,
    CHANGES,
    FARTHEST,
    FURTHER,
    SHARED_WITH_BEAM,
    grid,
)
from bench.rotation_grid import METRICS, Params, prepare, table  # noqa: E402
from streams.devtools.locomo.rotation import rotate  # noqa: E402

SHARED = ("dense", "neighbour", "session", "relativity")
L_R10, L_B4K = METRICS.index("recall_at_10"), METRICS.index("b4k")


def joint_configs(locomo: Sequence[Params], beam: Sequence[dict[str, Any]],
                  ) -> list[tuple[Params, int]]:
    """(LoCoMo point, BEAM point index) pairs agreeing on every shared weight."""
    by_shared: dict[tuple[float, ...], list[int]] = {}
    for i, b in enumerate(beam):
        by_shared.setdefault(tuple(float(b[k]) for k in SHARED), []).append(i)
    return [(p, i) for p in locomo
            for i in by_shared.get(tuple(float(getattr(p, k)) for k in SHARED), [])]


def run(workers: int) -> dict[str, Any]:
    prep = prepare(LOCOMO_DATA)
    added = CHANGES["date-lift"] | CHANGES["relativity"]
    configs = grid(*(part | added for part in (BASE_GRID, BEYOND, FURTHER, FARTHEST,
                                                SHARED_WITH_BEAM)))
    l_rows = table(prep, LOCOMO_DATA, configs, workers, lambda _m: None)
    b_names, b_rows = beam_grid_rows(BEAM_DATA)
    beam = [json.loads(n) for n in b_names]
    pairs = joint_configs(list(l_rows), beam)
    if not pairs:
        raise SystemExit("no configuration is in both grids: run both grids first")
    n_l = len(prep.questions)
    groups = ([f"locomo:{prep.convs[q['conv']].sample_id}" for q in prep.questions]
              + [f"beam:{r['chat']}" for r in b_rows[0]])
    l_obj = {p: (v[:, L_R10] + v[:, L_B4K]) / 2 for p, v in l_rows.items()}
    b_obj = [np.array([(r["b4k"] + r["all"] + r["r10"]) / 3 for r in rows]) for rows in b_rows]

    def score(c: tuple[Params, int], idx: Sequence[int]) -> float:
        ix = np.asarray(idx)
        lo, hi = ix[ix < n_l], ix[ix >= n_l] - n_l
        parts = [float(l_obj[c[0]][lo].mean())] if len(lo) else []
        parts += [float(b_obj[c[1]][hi].mean())] if len(hi) else []
        return sum(parts) / len(parts)

    def evaluate(c: tuple[Params, int], idx: Sequence[int]) -> list[dict[str, float]]:
        out: list[dict[str, float]] = []
        for i in idx:
            if i < n_l:
                v = l_rows[c[0]][i]
                out.append({"locomo": 1.0, "r10": float(v[L_R10]), "b4k": float(v[L_B4K])})
            else:
                r = b_rows[c[1]][i - n_l]
                out.append({"locomo": 0.0, **{k: float(r[k]) for k in ("b4k", "all", "r10")},
                            **({"ku": float(r["ku"])} if "ku" in r else {})})
        return out

    rot = rotate(pairs, groups, score, evaluate)
    folds = []
    for f in rot.folds:
        p, i = f.chosen
        mine = {"held_out": f.fold.held_out, **{k: v for k, v in asdict(p).items()},
                **{k: beam[i][k] for k in ("assistant", "passage_decay")}}
        for key in ("r10", "b4k", "all"):
            vals = [r[key] for r in f.rows if key in r]
            mine[key] = round(100 * sum(vals) / len(vals), 1) if vals else None
        folds.append(mine)
    held = [r for _, r in rot.held_out_rows()]

    def pooled(rows: list[dict[str, float]], keys: Sequence[str]) -> dict[str, float]:
        return {k: round(100 * sum(r[k] for r in rows if k in r)
                         / max(1, sum(1 for r in rows if k in r)), 1) for k in keys}

    lo = [r for r in held if r["locomo"] == 1.0]
    be = [r for r in held if r["locomo"] == 0.0]
    chosen = Counter()
    for f in folds:
        for k in (*SHARED, "person", "date_weight", "date_slack", "assistant", "passage_decay"):
            chosen[(k, f[k])] += 1
    return {"folds": folds, "locomo": pooled(lo, ("r10", "b4k")),
            "beam": {**pooled(be, ("b4k", "all", "r10")),
                     "ku_above": f"{sum(r['ku'] for r in be if 'ku' in r):.0f}/"
                                 f"{sum(1 for r in be if 'ku' in r)}"},
            "chosen": {f"{k}={v}": n for (k, v), n in sorted(chosen.items(), key=str)},
            "configurations": len(pairs)}


def render(doc: dict[str, Any]) -> str:
    lines = [f"{doc['configurations']} joint configurations; each fold chose on the others:",
             f"{'held out':<12} {'dense':>5} {'nbr':>4} {'sess':>4} {'rel':>4} {'pers':>4} "
             f"{'date':>4} {'asst':>4} {'decay':>5}   R@10    b4k    all"]
    for f in doc["folds"]:
        lines.append(
            f"{f['held_out']:<12} {f['dense']:>5} {f['neighbour']:>4} {f['session']:>4} "
            f"{f['relativity']:>4} {f['person']:>4} {f['date_weight']:>4} "
            f"{f['assistant']:>4} {f['passage_decay']:>5}  {f['r10']:>5}  {f['b4k']:>5}  "
            f"{f['all'] if f['all'] is not None else '':>5}")
    lines.append(f"LoCoMo held out by rotation: R@10 {doc['locomo']['r10']} %, "
                 f"b4k {doc['locomo']['b4k']} %")
    b = doc["beam"]
    lines.append(f"BEAM held out by rotation: in 4k {b['b4k']} %, all {b['all']} %, "
                 f"R@10 {b['r10']} %, updates above originals {b['ku_above']}")
    lines.append("chosen by the folds: " + ", ".join(f"{k} ({n})"
                                                  for k, n in doc["chosen"].items()))
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    doc = run(args.workers)
    print(json.dumps(doc) if args.json else render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
