"""Query benchmark: end-to-end memory lookups over Kafka, client to client.

1,000 users holding 100 memories each in their ``user_profile`` cube, and the
agent's own cube of 100 (built-in provider, lexical retrieval by default);
each request searches both. One worker, after one warm-up request per user
and until the worker holds every scope (its scope caches are then warm, as in
a running service); then requests sent open-loop at 50/s. Needs the services of ``make services``.
Ends by printing one JSON line with p50_ms, p95_ms, p99_ms, requests and
errors (``--cold``: measured from the worker's start instead), and where the
time goes: engine_p50_ms, the engine's time in the worker (each reply's
``latency_ms``), and outside_p50_ms, each request's time outside it (the
request's and the reply's way through Kafka, the answered-request check, the
request's decoding and the reply's encoding, waiting for the worker's loop).

    python bench/query.py [--users 1000] [--memories 100] [--rate 50] [--seconds 30]
                          [--embedder none|local] [--shape short|beam] [--new-questions]
    python bench/query.py --scale [--sizes 1000,10000,100000] [--rate 20]
                          [--embedders none,local] [--shape short|beam] [--new-questions]

``--scale`` (``bench/query_scale.py``) prints the curve of latency and memory as
one user's cubes grow instead, lexical and dense + lexical at each size.

``--shape beam`` (``bench/beam_shape.py``): agent conversations instead of short
LoCoMo-like memories. Each user's cube holds BEAM episodes as consolidation
stores them (user messages whole, assistant answers as passages of ~600
characters with their spans, one session per BEAM session), the agent's cube
twenty lessons, and the questions are BEAM's probing questions (each user's of
the chat it holds). By default 100 users of 1,000 memories each (a BEAM chat is
~1,300): the same 100,000 memories as the short shape's 1,000 users of 100. With
``--embedder local`` the memories' vectors come from the cache of
``bench/beam_shape.py --embed`` (MiniLM's, embedded once); the worker embeds
each question with MiniLM itself. BEAM has 200 probing questions, so they come
back: the warm-up asks each of them once too (the worker's embedder then holds
their vectors, as it holds a question asked again), and what is measured is the
engine over long memories. ``--new-questions`` makes every question asked new
to the embedder instead (:func:`anew`: the same words), so each one is embedded
as it arrives, as a service meets questions it has not seen.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import platform
import random
import shutil
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import SecretStr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import beam_shape  # noqa: E402
import query_scale  # noqa: E402
import scale_data  # noqa: E402
from machine import machine_ticks, steal_pct  # noqa: E402

from streams.adapters.db.engine import create_engine  # noqa: E402
from streams.adapters.db.migrate import upgrade  # noqa: E402
from streams.adapters.embeddings.embedders import LocalEmbedder  # noqa: E402
from streams.adapters.kafka.admin import ensure_topics  # noqa: E402
from streams.client import MemoryClient  # noqa: E402
from streams.devtools.local_worker import LocalWorker  # noqa: E402
from streams.devtools.locomo.scoring import percentile  # noqa: E402
from streams.devtools.traced_load import inside_a_trace  # noqa: E402
from streams.memory.model import MemoryCandidate, agent_cube  # noqa: E402
from streams.memory.provider import Scope  # noqa: E402
from streams.memory.providers.builtin.provider import BuiltinProvider  # noqa: E402
from streams.settings import (  # noqa: E402
    DatabaseSettings,
    EmbeddingSettings,
    KafkaSettings,
    QuerySettings,
    RedisSettings,
    Settings,
    WebSettings,
)
from tests.support.services import (  # noqa: E402
    KAFKA_BROKER,
    REDIS_PORT,
    create_database,
    delete_topics_containing,
    drop_database,
    free_port,
)

# the warm-up of the scale mode: given a function asking one question, seconds it took
Prepare = Callable[[query_scale.Ask], Awaitable[float]]
# the question user ``u`` asks next, drawn with ``rng``: (rng, u) -> text
Questions = Callable[[random.Random, int], str]
DEFAULTS = {"short": (1000, 100), "beam": (100, 1000)}  # users, memories per user


def short_question(rng: random.Random, user: int) -> str:
    return scale_data.question(rng)


def beam_question(rng: random.Random, user: int) -> str:
    """A probing question of the chat user ``user`` holds (:func:`beam_shape.user_offset`)."""
    return beam_shape.question(rng, beam_shape.user_chat(user))


def beam_any_question(rng: random.Random, user: int) -> str:
    """The scale mode's: its one user's cube holds every chat in turn."""
    return beam_shape.question(rng)


def beam_every_question(users: int, scale: bool = False) -> list[tuple[int, str]]:
    """Each BEAM question a run may ask, with a user who may ask it (the scale mode's one
    user asks them all)."""
    if scale:
        return [(0, q) for q in beam_shape.questions()]
    chats = {beam_shape.user_chat(u): u for u in reversed(range(users))}
    return [(u, q) for chat, u in chats.items() for q in beam_shape.questions(chat)]


def anew(message: str, n: int) -> str:
    """``message`` as the ``n``-th question never asked before: its first space replaced by
    a run of spaces and tabs spelling ``n`` in binary. Neither the lexical analysis nor
    the embedder's tokenizer sees any difference (the same words, the same vector); the
    embedder's cache of recent texts, keyed by the text, does not know it."""
    run = "".join(" \t"[int(b)] for b in f"{n:b}")
    return message.replace(" ", f" {run}", 1) if " " in message else message + run


async def ask_every(ask: query_scale.Ask, every: Sequence[tuple[int, str]]) -> None:
    """Each of ``every`` asked once, 16 at a time."""
    gate = asyncio.Semaphore(16)

    async def once(user: int, message: str) -> None:
        async with gate:
            await ask(f"user-{user}", message=message)

    await asyncio.gather(*(once(u, q) for u, q in every))


def memory_text(rng: random.Random, user: int, i: int) -> str:
    return scale_data.memory_text(rng, f"User {user}", i)


async def seed(settings: Settings, users: int, per_user: int, embed: bool) -> float:
    engine = create_engine(settings.database)
    await upgrade(engine)
    embedder = LocalEmbedder() if embed else None
    provider = BuiltinProvider(engine, embedder=embedder)
    rng = random.Random(3)
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    start = time.perf_counter()
    # the agent's own cube: experience shared by all its users, as large as one user's
    agent_scope = Scope("bench", "user-0", "agent-1")
    await provider.add(agent_scope, agent_cube("agent-1"), [
        MemoryCandidate(content=memory_text(rng, 0, i).replace("User 0", "The agent"),
                        type="skill", scope="agent", importance=0.5,
                        event_time=t0 + timedelta(days=i), source_event_ids=(f"a-e{i}",))
        for i in range(per_user)])
    for u in range(users):
        scope = Scope("bench", f"user-{u}", "agent-1")
        await provider.add(scope, "user_profile", [
            MemoryCandidate(content=memory_text(rng, u, i), type="text", scope="user",
                            importance=0.5, event_time=t0 + timedelta(days=i),
                            source_event_ids=(f"u{u}-e{i}",))
            for i in range(per_user)])
        if u % 100 == 99:
            print(f"  seeded {u + 1}/{users} users", file=sys.stderr, flush=True)
    await engine.dispose()
    return time.perf_counter() - start


async def seed_beam(settings: Settings, users: int, per_user: int, embed: bool) -> float:
    """:func:`seed` of the BEAM shape: the agent's lessons, and user ``u``'s cube the first
    ``per_user`` memories of its stream (:func:`beam_shape.user_offset`)."""
    engine = create_engine(settings.database)
    await upgrade(engine)
    vectors = query_scale.Precomputed(np.zeros((0, 384), dtype=np.float32)) if embed else None
    if vectors is not None:
        embedded = beam_shape.vectors([0], len(beam_shape.base()))[1]  # embedded if missing
        print(f"  {embedded:,} BEAM episodes' vectors embedded", file=sys.stderr)
    provider = BuiltinProvider(engine, embedder=vectors)
    start = time.perf_counter()
    await query_scale.add_beam(provider, vectors, Scope("bench", "user-0", "agent-1"),
                               agent_cube("agent-1"),
                               [beam_shape.lesson(i) for i in range(len(beam_shape.LESSONS))])
    for u in range(users):
        offset = beam_shape.user_offset(u)
        await query_scale.add_episodes(provider, vectors, Scope("bench", f"user-{u}", "agent-1"),
                                       beam_shape.episodes(offset, 0, per_user), 0, offset)
        if u % 10 == 9:
            print(f"  seeded {u + 1}/{users} users ({time.perf_counter() - start:.0f} s)",
                  file=sys.stderr, flush=True)
    await engine.dispose()
    return time.perf_counter() - start


async def load(settings: Settings, users: int, rate: float, seconds: float,
               warm: bool, prepare: Prepare | None = None,
               questions: Questions = short_question,
               every: Sequence[tuple[int, str]] = (), new: bool = False,
               settled: Callable[[query_scale.Ask], Awaitable[None]] | None = None,
               sampled_share: float | None = None,
               ) -> dict[str, Any]:
    """``prepare``: awaited with a function asking one question of a user and an agent,
    instead of the warm-up of one question per user; returns the seconds it took.
    ``questions``: what each user asks; ``every``: (user, question) asked once after the
    warm-up of one question per user (when ``warm``): the BEAM shape's questions, each
    met once before, as a running service meets a question asked again; ``new``: each
    question asked is new to the worker's embedder (:func:`anew`); ``settled``: awaited
    last (when ``warm``) with the function asking one question, until the worker holds
    every scope."""
    rng = random.Random(9)
    latencies: list[float] = []
    outside: list[float] = []  # each request's time outside the worker's engine
    engine: list[float] = []
    sent: list[tuple[float, float, bool]] = []  # each measured request: when, how long, whole
    errors = 0
    begin = 0.0
    async with MemoryClient(settings.kafka.broker, request_topic=settings.kafka.queries_topic,
                            reply_topic=settings.query.reply_topic, timeout_s=10) as client:

        asked = itertools.count(1)
        trace_rng = random.Random(11)

        async def ask(user_id: str, agent_id: str = "agent-1",
                      took: list[float] | None = None, message: str | None = None) -> bool:
            """``took``: gets the engine's time in the worker (the reply's ``latency_ms``);
            ``message``: this question instead of one drawn."""
            if message is None:
                number = user_id.rsplit("-", 1)[-1]
                message = questions(rng, int(number) if number.isdigit() else 0)
            if new:
                message = anew(message, next(asked))
            traced = (contextlib.nullcontext() if sampled_share is None
                      else inside_a_trace(trace_rng, sampled_share))
            try:
                with traced:
                    reply = await client.query(tenant_id="bench", user_id=user_id,
                                               agent_id=agent_id, message=message,
                                               include_short_term=False)
            except Exception:
                return False
            if took is not None and reply.latency_ms is not None:
                took.append(reply.latency_ms)
            return reply.error is None and not reply.warnings

        async def one(record: bool, user: int | None = None) -> None:
            nonlocal errors
            u = rng.randrange(users) if user is None else user
            start = time.perf_counter()
            took: list[float] = []
            ok = await ask(f"user-{u}", took=took)
            if record:
                latencies.append((time.perf_counter() - start) * 1000)
                sent.append((start - begin, latencies[-1], ok))
                errors += 0 if ok else 1
                if took:
                    engine.append(took[0])
                    outside.append(latencies[-1] - took[0])

        warm_start = time.perf_counter()
        gate = asyncio.Semaphore(16)

        async def warm_one(user: int) -> None:
            async with gate:
                await one(False, user)

        if prepare is not None:
            warmup_s = await prepare(ask)
        else:
            # one request per user (every user when ``warm``), so that what is measured is
            # a running service, not its first minute
            await asyncio.gather(*(warm_one(u) for u in range(users if warm else 20)))
            if warm:
                await ask_every(ask, every)
                if settled is not None:
                    await settled(ask)
            warmup_s = time.perf_counter() - warm_start
        tasks = []
        interval = 1.0 / rate
        begin = time.perf_counter()
        n = int(rate * seconds)
        for i in range(n):
            delay = begin + i * interval - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(True)))
        await asyncio.gather(*tasks)
        elapsed = time.perf_counter() - begin
    print(by_window(sent), file=sys.stderr)
    return {
        "requests": len(latencies),
        "errors": errors,
        "p50_ms": round(percentile(latencies, 50), 2),
        "p95_ms": round(percentile(latencies, 95), 2),
        "p99_ms": round(percentile(latencies, 99), 2),
        "engine_p50_ms": round(percentile(engine, 50), 2),
        "outside_p50_ms": round(percentile(outside, 50), 2),
        "achieved_rate": round(len(latencies) / elapsed, 1),
        "warmup_s": round(warmup_s, 1),
    }


async def until_held(ask: query_scale.Ask, users: int, port: int, held: int,
                     limit_s: float) -> None:
    """Wait until the worker holds ``held`` memories (its ``/metrics``) and builds no vector
    graph, asking every user again each 10 s meanwhile: a scope's load goes on when the
    question that began it gives up (the client's 10 s), and the measurement would begin
    behind it; a question that found no connection for its load began none."""
    start = last = time.perf_counter()
    while time.perf_counter() - start < limit_s:
        g = await query_scale.gauges(port)
        if (g["memstream_scope_cache_memories"] >= held
                and g["memstream_vector_graphs_building"] == 0):
            return
        if time.perf_counter() - last > 10:
            await ask_every(ask, [(u, "What did we decide?") for u in range(users)])
            last = time.perf_counter()
        await asyncio.sleep(0.5)
    print(f"  the worker does not hold the {held:,} memories after {limit_s:.0f} s",
          file=sys.stderr)


def by_window(sent: list[tuple[float, float, bool]], width: float = 5.0) -> str:
    """The measured requests by ``width`` seconds of sending: how many, p50, p99 and the
    slowest, and how many were not whole (a transient shows here, not in the totals)."""
    lines = [f"{'sent at s':>10}  {'requests':>8}  {'p50 ms':>8}  {'p99 ms':>8}  {'max ms':>8}"
             "  not whole"]
    windows: dict[int, list[tuple[float, bool]]] = {}
    for at, ms, ok in sent:
        windows.setdefault(int(at // width), []).append((ms, ok))
    for w, got in sorted(windows.items()):
        ms = [m for m, _ in got]
        lines.append(f"{w * width:>10.0f}  {len(got):>8}  {percentile(ms, 50):>8.1f}  "
                     f"{percentile(ms, 99):>8.1f}  {max(ms):>8.1f}  "
                     f"{sum(not ok for _, ok in got):>9}")
    return "\n".join(lines)


async def forget_run(settings: Settings) -> None:
    """A finished run's topics (each named after its app id) and its worker's Faust
    data directory."""
    try:
        await delete_topics_containing(settings.kafka.app_id)
    finally:
        shutil.rmtree(settings.kafka.data_dir, ignore_errors=True)


def run_settings(run: str, url: str, embedder: str, held: int = 200_000) -> Settings:
    k = KafkaSettings(broker=KAFKA_BROKER, app_id=f"qbench-{run}", partitions=4,
                      data_dir=str(ROOT / ".bench" / f"qbench-{run}"),
                      **{f"{n}_topic": f"qbench-{run}.{n}" for n in (
                          "chat", "subagent", "dlq", "retry", "session_closed", "queries",
                          "agent_config", "idle")})
    return Settings(
        kafka=k,
        database=DatabaseSettings(url=SecretStr(url)),
        redis=RedisSettings(url=SecretStr(f"redis://127.0.0.1:{REDIS_PORT}/6"),
                            key_prefix=f"qb{run}"),
        embedding=EmbeddingSettings(kind=embedder),
        query=QuerySettings(reply_topic=f"qbench-{run}.replies", scope_cache_memories=held,
                            scope_hold_max=held),
        web=WebSettings(port=free_port()),
    )


async def scale_point(args: argparse.Namespace, run: str, url: str, n: int,
                      embedder: str, held: int) -> dict[str, Any]:
    """One point of the scale curve (``query_scale``): a worker with ``embedder`` over the
    seeded cubes of ``n`` memories (``held`` in both), warmed, then measured."""
    settings = run_settings(run, url, embedder, max(200_000, held))
    worker = None
    marks: dict[str, float] = {}
    ticks: list[tuple[int, int]] = []  # the machine's at the measurement's start
    try:
        await ensure_topics(settings.kafka)
        worker = LocalWorker(settings, ROOT / ".bench" / "query-worker.log").start()
        await asyncio.sleep(args.settle)
        pid = worker.proc.pid

        async def prepare(ask: query_scale.Ask) -> float:
            await ask("nobody", "agent-none")  # libraries and the model loaded; no scope
            marks["ready_mb"] = query_scale.rss_mb(pid)
            took = await query_scale.warm(ask, settings.web.port, held, args.warm_limit)
            if args.shape == "beam":
                start = time.perf_counter()
                await ask_every(ask, beam_every_question(1, scale=True))
                took += time.perf_counter() - start
            marks["cpu_s"] = query_scale.cpu_s(pid)  # the measurement begins
            ticks.append(machine_ticks())
            return took

        print(f"  {embedder}: load {args.rate}/s for {args.seconds}s ...", file=sys.stderr)
        result = await load(settings, 1, args.rate, args.seconds, True, prepare,
                            beam_any_question if args.shape == "beam" else short_question,
                            new=args.new_questions)
        warm_mb = query_scale.rss_mb(pid)
        cpu_ms = 1000 * (query_scale.cpu_s(pid) - marks["cpu_s"]) / max(result["requests"], 1)
        steal = steal_pct(ticks[0], machine_ticks())
    finally:
        if worker is not None:
            worker.stop()
        await forget_run(settings)
    result.update({
        "memories_per_cube": n, "memories_held": held, "embedder": embedder,
        "warm_s": result.pop("warmup_s"),
        "worker_cpu_ms_per_query": round(cpu_ms, 1), "steal_pct": steal,
        "rss_ready_mb": round(marks["ready_mb"], 1), "rss_warm_mb": round(warm_mb, 1),
        "mb_per_100k": round((warm_mb - marks["ready_mb"]) / held * 100_000, 1),
    })
    return result


async def scale(args: argparse.Namespace) -> dict[str, Any]:
    """The curve: one database grown size by size (memory ``i`` of a cube is the same at
    every size), each size measured by a fresh worker per embedder."""
    sizes = sorted(int(x) for x in args.sizes.split(","))
    embedders = args.embedders.split(",")
    run = f"{int(time.time())}"
    db = f"bench_qscale_{run}"
    url = create_database(db)
    rows: list[dict[str, Any]] = []
    seeder = query_scale.Seeder(url, sizes[-1], dense="local" in embedders, shape=args.shape)
    try:
        for n in sizes:
            seed_s = await seeder.grow(n)
            for embedder in embedders:
                row = await scale_point(args, f"{run}-{n}-{embedder}", url, n, embedder,
                                        seeder.memories(n))
                rows.append({**row, "seed_s": round(seed_s, 1)})
                print(query_scale.table(rows), file=sys.stderr, flush=True)
    finally:
        await seeder.close()
        drop_database(db)
    return {
        "scale": rows, "shape": args.shape, "rate": args.rate, "seconds": args.seconds,
        "new_questions": args.new_questions,
        "vectors_embedded": seeder.embedded,
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, Python {platform.python_version()}",
        "load_avg": os.getloadavg(),
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    if args.rate is None:
        args.rate = 20.0 if args.scale else 50.0
    users, memories = DEFAULTS[args.shape]
    args.users = users if args.users is None else args.users
    args.memories = memories if args.memories is None else args.memories
    if args.scale:
        return await scale(args)
    run = f"{int(time.time())}"
    db = f"bench_query_{run}"
    url = create_database(db)
    settings = run_settings(run, url, args.embedder)
    worker = None
    try:
        print(f"seeding {args.users} users x {args.memories} {args.shape} memories ...",
              file=sys.stderr)
        seed_s = await (seed_beam if args.shape == "beam" else seed)(
            settings, args.users, args.memories, args.embedder == "local")
        await ensure_topics(settings.kafka)
        worker = LocalWorker(settings, ROOT / ".bench" / "query-worker.log").start()
        await asyncio.sleep(args.settle)
        print(f"load: {args.rate}/s for {args.seconds}s ...", file=sys.stderr)
        beam = args.shape == "beam"
        held = args.users * args.memories + (len(beam_shape.LESSONS) if beam else args.memories)
        result = await load(settings, args.users, args.rate, args.seconds,
                            warm=not args.cold,
                            questions=beam_question if beam else short_question,
                            every=beam_every_question(args.users) if beam else (),
                            new=args.new_questions,
                            settled=lambda ask: until_held(ask, args.users, settings.web.port,
                                                           held, args.warm_limit),
                            sampled_share=args.sampled_share)
    finally:
        if worker is not None:
            worker.stop()
        drop_database(db)
        await forget_run(settings)
    result.update({
        "shape": args.shape, "users": args.users, "memories_per_user": args.memories,
        "rate": args.rate, "new_questions": args.new_questions,
        **({"vectors_embedded": min(len(beam_shape.base()),
                                    scale_data.largest_cached(beam_shape.CACHE_KEY))}
           if args.shape == "beam" and args.embedder == "local" else {}),
        "embedder": args.embedder, "cold": args.cold, "seed_s": round(seed_s, 1),
        "sampled_share": args.sampled_share,
        "tracing": "on" if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") else "off",
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, Python {platform.python_version()}",
        "load_avg": os.getloadavg(),
    })
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=None,
                    help="users (1,000; --shape beam: 100)")
    ap.add_argument("--memories", type=int, default=None,
                    help="memories per user (100; --shape beam: 1,000)")
    ap.add_argument("--rate", type=float, default=None, help="requests/s (50; --scale: 20)")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--settle", type=float, default=8.0, help="seconds for the worker to join")
    ap.add_argument("--embedder", choices=["none", "local"], default="none")
    ap.add_argument("--shape", choices=["short", "beam"], default="short",
                    help="the memories and questions: short LoCoMo-like ones, or BEAM "
                         "conversations (beam_shape.py)")
    ap.add_argument("--new-questions", action="store_true",
                    help="every question new to the worker's embedder (its cache of recent "
                         "texts): the same words, spaced anew each time")
    ap.add_argument("--cold", action="store_true",
                    help="measure from the worker's start (20 warm-up requests, not one per user)")
    ap.add_argument("--scale", action="store_true",
                    help="the scale curve: one user, cubes of each of --sizes (query_scale.py)")
    ap.add_argument("--sizes", default="1000,10000,100000", help="memories per cube (--scale)")
    ap.add_argument("--embedders", default="none,local",
                    help="the workers measured at each size (--scale)")
    ap.add_argument("--sampled-share", type=float, default=None,
                    help="each query asked inside a trace of its own, this share sampled (what "
                         "tracing costs: with OTEL_EXPORTER_OTLP_ENDPOINT set, the worker exports)")
    ap.add_argument("--warm-limit", type=float, default=600.0,
                    help="longest wait for the scopes to be held (--scale: per size), seconds")
    print(json.dumps(asyncio.run(main(ap.parse_args()))))
