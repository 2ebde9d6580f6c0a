"""``memstream bench locomo|beam``: the LoCoMo and BEAM harnesses, through Kafka.

``bench locomo --data FILE [--json]`` publishes the conversations, waits for
consolidation, asks every question of categories 1–4 through the query topic,
and reports evidence recall@5/@10/@20, recall within the long-memory token
budget and query latency, overall and per category.

``bench beam --data DIR [--json]`` publishes the BEAM chats (a person and an
assistant, with their roles), waits for consolidation, asks every question
from a conversation of its own, in closed loop (``--in-flight``) or open loop
(``--rate``), and reports evidence inside the budget, recall@10, the order of
knowledge updates, tokens used, latency and the memories that reach other
users' replies, overall and per question type.

Both start a worker with the current settings unless ``--no-worker`` (then the
running workers answer).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from streams.adapters.kafka.admin import ensure_topics
from streams.cli._common import fail
from streams.devtools.beam import harness as beam_harness
from streams.devtools.beam import scoring as beam_scoring
from streams.devtools.beam.dataset import load_chats
from streams.devtools.harness_common import (
    Arrivals,
    fact_quality,
    render_facts,
    stderr_progress,
    wait_for_consolidation,
)
from streams.devtools.local_worker import LocalWorker
from streams.devtools.locomo import harness as locomo_harness
from streams.devtools.locomo import scoring as locomo_scoring
from streams.devtools.locomo.dataset import load_samples
from streams.settings import Settings, get_settings


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _rate(text: str) -> float:
    value = float(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return value


def register(sub: Any) -> None:
    p = sub.add_parser("bench", help="benchmarks: `bench locomo` and `bench beam` run the "
                                     "LoCoMo and BEAM harnesses")
    bench = p.add_subparsers(dest="bench", metavar="BENCH", required=True)
    lo = bench.add_parser("locomo", help="evidence recall on a LoCoMo file, through Kafka")
    lo.add_argument("--data", required=True, type=Path, help="a file in the locomo10.json layout")
    lo.add_argument("--json", action="store_true", help="print one JSON line")
    lo.add_argument("--no-worker", action="store_true", help="use the running workers")
    lo.add_argument("--samples", type=_positive_int, default=None,
                    help="only the first N samples")
    lo.add_argument("--top-k", type=_positive_int, default=20)
    lo.add_argument("--budget", type=_positive_int, default=4000)
    lo.add_argument("--in-flight", type=_positive_int, default=4,
                    help="questions asked at once")
    lo.add_argument("--timeout", type=float, default=900.0, help="seconds for consolidation")
    lo.set_defaults(func=run)
    be = bench.add_parser("beam", help="evidence, update order and cross-user leaks on BEAM "
                                       "chats, through Kafka")
    be.add_argument("--data", required=True, type=Path,
                    help="a folder of chat folders (chat.json, probing_questions.json), or one")
    be.add_argument("--json", action="store_true", help="print one JSON line")
    be.add_argument("--no-worker", action="store_true", help="use the running workers")
    be.add_argument("--chats", type=_positive_int, default=None, help="only the first N chats")
    be.add_argument("--top-k", type=_positive_int, default=50)
    be.add_argument("--budget", type=_positive_int, default=4000)
    arrivals = be.add_mutually_exclusive_group()
    arrivals.add_argument("--in-flight", type=_positive_int, default=4,
                          help="questions asked at once (closed loop)")
    arrivals.add_argument("--rate", type=_rate, default=None,
                          help="questions sent per second whatever the replies (open loop)")
    be.add_argument("--timeout", type=float, default=3600.0, help="seconds for consolidation")
    be.set_defaults(func=run_beam)


async def _with_worker(args: argparse.Namespace, settings: Settings, name: str,
                       body: Callable[[LocalWorker | None], Awaitable[Any]]) -> Any:
    """``body(worker)`` with a local worker running unless ``--no-worker``."""
    worker = None
    if not args.no_worker:
        await ensure_topics(settings.kafka)
        log = Path(tempfile.gettempdir()) / f"memstream-{name}-worker.log"
        worker = LocalWorker(settings, log).start()
        stderr_progress(f"worker started (log: {log})")
    try:
        return await body(worker)
    except Exception:
        if worker is not None and worker.exited:
            stderr_progress(worker.log_tail())
        raise
    finally:
        if worker is not None:
            worker.stop()


def _alive(worker: LocalWorker | None) -> Callable[[], bool]:
    return lambda: worker is None or not worker.exited


def _labels(settings: Settings) -> dict[str, Any]:
    return {"embedder": settings.embedding.kind,
            "judge": "model" if settings.llm.base_url else "rules"}


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    settings = get_settings()
    samples = load_samples(args.data)[: args.samples]
    opts = locomo_harness.HarnessOptions(
        top_k=args.top_k, budget_tokens=args.budget, in_flight=args.in_flight,
        consolidation_timeout_s=args.timeout)

    facts: dict[str, Any] = {}

    async def body(worker: LocalWorker | None) -> list[locomo_scoring.QuestionScore]:
        turns = sum(s.turn_count for s in samples)
        stderr_progress(f"publishing {len(samples)} conversations, {turns} turns")
        sessions = await locomo_harness.publish(settings, samples, opts)
        await wait_for_consolidation(settings, opts.tenant, sessions,
                                     opts.consolidation_timeout_s, stderr_progress,
                                     alive=_alive(worker))
        facts.update(await fact_quality(settings, opts.tenant))
        return await locomo_harness.ask_all(settings, samples, opts, stderr_progress)

    results = await _with_worker(args, settings, "locomo", body)
    summary = locomo_scoring.summarize(results)
    doc = summary.as_json()
    doc.update({**facts, **_labels(settings)})
    if not args.json:
        print(locomo_scoring.render_table(summary))
        print(render_facts(doc))
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


async def _run_beam(args: argparse.Namespace) -> dict[str, Any]:
    settings = get_settings()
    chats = load_chats(args.data)[: args.chats]
    arrivals = Arrivals(in_flight=args.in_flight, rate=args.rate)
    opts = beam_harness.HarnessOptions(top_k=args.top_k, budget_tokens=args.budget,
                                       arrivals=arrivals, consolidation_timeout_s=args.timeout)

    facts: dict[str, Any] = {}

    async def body(worker: LocalWorker | None) -> tuple[int, float, list[beam_scoring.Asked]]:
        turns = sum(c.turn_count for c in chats)
        stderr_progress(f"publishing {len(chats)} chats, {turns} turns")
        sessions = await beam_harness.publish(settings, chats, opts)
        took = await wait_for_consolidation(settings, opts.tenant, sessions,
                                            opts.consolidation_timeout_s, stderr_progress,
                                            alive=_alive(worker))
        facts.update(await fact_quality(settings, opts.tenant))
        questions = sum(len(c.questions) for c in chats)
        stderr_progress(f"asking {questions} questions ({arrivals.describe()})")
        return sessions, took, await beam_harness.ask_all(settings, chats, opts,
                                                          stderr_progress)

    sessions, took, asked = await _with_worker(args, settings, "beam", body)
    summary = beam_scoring.summarize(asked)
    doc = summary.as_json()
    doc.update({"chats": len(chats), "sessions": sessions, "consolidation_s": round(took, 1),
                "sessions_per_minute": round(sessions / took * 60, 1) if took > 0 else None,
                "top_k": args.top_k, "budget": args.budget,
                "in_flight": None if args.rate else args.in_flight, "rate": args.rate,
                **facts, **_labels(settings)})
    if not args.json:
        print(beam_scoring.render_table(summary, budget=args.budget,
                                        arrivals=arrivals.describe()))
        print(f"consolidation: {doc['sessions']} sessions in {doc['consolidation_s']} s "
              f"({doc['sessions_per_minute']} sessions/minute)")
        print(render_facts(doc))
    return doc


def run_beam(args: argparse.Namespace) -> int:
    if not args.data.exists():
        return fail(f"no such folder: {args.data}", 2)
    try:
        doc = asyncio.run(_run_beam(args))
    except (ValueError, TimeoutError, RuntimeError) as exc:
        return fail(str(exc))
    if args.json:
        print(json.dumps(doc))
    return 0
