"""Noisy-neighbour benchmark: a calm tenant's service alone and beside a loud one.

Runs the phases of ``tests/chaos/test_neighbour.py`` (one worker each, under an
RSS limit like the pod's) ``--repeat`` times, alternating: calm alone, then calm
beside loud (its long session, erasures every few seconds, a query flood over
its quota). Prints one JSON line per phase — calm's query p50/p99 (1 s
deadline; late ones count as infinitely slow), calm's consolidation delay
(session_end produced → run finished) p50/p95, loud's outcomes (stored,
consolidated, dead-lettered, flood answered / over_quota, erasure receipts),
the worker's RSS peak and restarts — then a summary: each figure's spread per
phase and the worst beside-loud figure against the best-case limit of the
issue, calm-alone's median + 20 %.

    python bench/neighbour.py [--repeat 2] [--seconds 60] [--loud-messages 30000]
                              [--no-session] [--no-erase] [--no-flood] [--no-alone]
                              [--loud-events-per-s N] [--loud-events-over-quota delay]

``--no-session``, ``--no-erase``, ``--no-flood`` turn one part of loud's load
off, to find which one hurts; ``--loud-events-per-s`` gives loud a quota of
chat events (``events_per_s``, a burst of twice that or 2,000 at most, and
``--loud-events-over-quota``: ``delay`` or ``dead_letter``); other knobs come from ``NEIGHBOUR_*``
(tests/chaos/tenants.py). Needs the services of ``make services``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.chaos.neighbour import run_phase  # noqa: E402
from tests.chaos.neighbour_figures import PhaseFigures  # noqa: E402
from tests.chaos.tenants import NeighbourConfig  # noqa: E402

COMPARED = ("calm_p99_ms", "calm_p50_ms", "calm_delay_p50_s", "calm_delay_p95_s")


def summary(cfg: NeighbourConfig, alone: list[PhaseFigures],
            beside: list[PhaseFigures]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in COMPARED:
        a = [getattr(p, key) for p in alone]
        b = [getattr(p, key) for p in beside]
        row: dict[str, Any] = {"alone": [round(x, 3) for x in a],
                               "beside_loud": [round(x, 3) if math.isfinite(x) else None
                                               for x in b]}
        if a and b:
            limit = statistics.median(a) * (1 + cfg.margin)
            row["limit_20pct"] = round(limit, 3)
            row["within_20pct"] = all(math.isfinite(x) and x <= limit for x in b)
        out[key] = row
    out["restarts"] = sum(p.restarts for p in alone + beside)
    out["rss_peak_mb"] = round(max((p.rss_peak_mb for p in alone + beside), default=0.0))
    return out


async def main(args: argparse.Namespace) -> None:
    overrides: dict[str, Any] = {"seconds": args.seconds}
    if args.loud_messages is not None:
        overrides["loud_messages"] = args.loud_messages
    if args.no_session:
        overrides["loud_messages"] = 0
    if args.no_erase:
        overrides["erase_every_s"] = 0.0
    if args.no_flood:
        overrides["flood_rate"] = 0.0
    cfg = NeighbourConfig.from_env(**overrides)
    if args.loud_events_per_s:  # the workers inherit this process's environment
        os.environ["MEMSTREAM_QUOTAS__TENANT_OVERRIDES"] = json.dumps({"loud": {
            "events_per_s": args.loud_events_per_s,
            "events_burst": int(min(2 * args.loud_events_per_s, 2000)) or 1,
            "events_over_quota": args.loud_events_over_quota}})
    print(json.dumps({"config": cfg.describe(),
                      "quotas": os.environ.get("MEMSTREAM_QUOTAS__TENANT_OVERRIDES", ""),
                      "machine": f"{platform.machine()} {os.cpu_count()} cpu, "
                                 f"Python {platform.python_version()}"}), flush=True)
    alone: list[PhaseFigures] = []
    beside: list[PhaseFigures] = []
    tmp = Path(tempfile.mkdtemp(prefix="bench-neighbour-", dir=ROOT / ".bench"))
    try:
        for i in range(args.repeat):
            if not args.no_alone:
                a = await run_phase(f"calm alone #{i + 1}", cfg.without_loud(), tmp / f"a{i}")
                alone.append(a)
                print(json.dumps(a.as_dict()), flush=True)
            if cfg.loud_enabled:
                b = await run_phase(f"calm beside loud #{i + 1}", cfg, tmp / f"b{i}")
                beside.append(b)
                print(json.dumps(b.as_dict()), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps({"summary": summary(cfg, alone, beside)}), flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=60.0, help="calm's traffic per phase")
    ap.add_argument("--loud-messages", type=int, default=None)
    ap.add_argument("--no-session", action="store_true", help="loud sends no long session")
    ap.add_argument("--no-erase", action="store_true", help="loud erases nothing")
    ap.add_argument("--no-flood", action="store_true", help="loud sends no queries")
    ap.add_argument("--no-alone", action="store_true", help="only the phases beside loud")
    ap.add_argument("--loud-events-per-s", type=float, default=0.0,
                    help="loud's quota of chat events a second (0: none)")
    ap.add_argument("--loud-events-over-quota", choices=("delay", "dead_letter"),
                    default="delay")
    asyncio.run(main(ap.parse_args()))
