"""``memstream bench locomo --data FILE [--json]``: the LoCoMo harness.

Publishes the conversations through Kafka, waits for consolidation, asks
every question of categories 1–4 through the query topic, and reports
evidence recall@5/@10/@20, recall within the long-memory token budget and
query latency, overall and per category. Starts a worker with the current
settings unless ``--no-worker`` (then the running workers answer).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from streams.adapters.kafka.admin import ensure_topics
from streams.cli._common import fail
from streams.devtools.local_worker import LocalWorker
from streams.devtools.locomo.dataset import load_samples
from streams.devtools.locomo.harness import (
    HarnessOptions,
    ask_all,
    publish,
    stderr_progress,
    wait_for_consolidation,
)
from streams.devtools.locomo.scoring import render_table, summarize
from streams.settings import get_settings


def register(sub: Any) -> None:
    p = sub.add_parser("bench", help="benchmarks: `bench locomo` runs the LoCoMo harness")
    bench = p.add_subparsers(dest="bench", metavar="BENCH", required=True)
    lo = bench.add_parser("locomo", help="evidence recall on a LoCoMo file, through Kafka")
    lo.add_argument("--data", required=True, type=Path, help="a file in the locomo10.json layout")
    lo.add_argument("--json", action="store_true", help="print one JSON line")
    lo.add_argument("--no-worker", action="store_true", help="use the running workers")
    lo.add_argument("--samples", type=int, default=None, help="only the first N samples")
    lo.add_argument("--top-k", type=int, default=20)
    lo.add_argument("--budget", type=int, default=4000)
    lo.add_argument("--in-flight", type=int, default=4, help="questions asked at once")
    lo.add_argument("--timeout", type=float, default=900.0, help="seconds for consolidation")
    lo.set_defaults(func=run)


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    settings = get_settings()
    samples = load_samples(args.data)[: args.samples]
    opts = HarnessOptions(top_k=args.top_k, budget_tokens=args.budget, in_flight=args.in_flight,
                          consolidation_timeout_s=args.timeout)
    worker = None
    if not args.no_worker:
        await ensure_topics(settings.kafka)
        log = Path(tempfile.gettempdir()) / "memstream-locomo-worker.log"
        worker = LocalWorker(settings, log).start()
        stderr_progress(f"worker started (log: {log})")
    try:
        turns = sum(s.turn_count for s in samples)
        stderr_progress(f"publishing {len(samples)} conversations, {turns} turns")
        sessions = await publish(settings, samples, opts)
        await wait_for_consolidation(settings, opts, sessions, stderr_progress,
                                     alive=lambda: worker is None or not worker.exited)
        results = await ask_all(settings, samples, opts, stderr_progress)
    except Exception:
        if worker is not None and worker.exited:
            stderr_progress(worker.log_tail())
        raise
    finally:
        if worker is not None:
            worker.stop()
    summary = summarize(results)
    doc = summary.as_json()
    doc["embedder"] = settings.embedding.kind
    doc["judge"] = "model" if settings.llm.base_url else "rules"
    if not args.json:
        print(render_table(summary))
    return doc


def run(args: argparse.Namespace) -> int:
    if not args.data.exists():
        return fail(f"no such file: {args.data}", 2)
    try:
        doc = asyncio.run(_run(args))
    except (ValueError, TimeoutError, RuntimeError) as exc:
        return fail(str(exc))
    if args.json:
        print(json.dumps(doc))
    return 0
