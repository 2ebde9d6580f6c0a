"""The query engine in process: its CPU per request at scale, and two builds compared.

One user's ``user_profile`` cube and the agent's cube hold N memories each (the
data of the scale curve, ``bench/query_scale.py``), in a database kept between
runs (``bench_engine_{N}``; ``--fresh`` seeds it again). The worker's own
``QueryEngine`` (built by the worker's wiring, with the worker's garbage-collector
tuning) answers the scale mode's questions one at a time: no Kafka and no other
work on its event loop, so the figures are the engine's alone. A warm-up asks
until both scopes are held (replies without a warning), then 20 more questions.
Reported: CPU per request (p50 and mean, ``time.process_time``) and wall time.

``--gap-ms 50`` pauses before each question, as a worker answering 20 requests a
second meets them: the processor's caches have gone cold by then (other processes
ran), and the same code costs about 1.5 times as much CPU as back to back. Figures
of the running worker are nearer those.

``--against REV`` compares builds: git revision REV (exported once to
``.bench/engine/REV``) and this build answer the same questions in turn, each
round in a fresh process of each, and the replies of both (every field but
``latency_ms``) are compared. ``--against DIR``: the build whose ``streams/`` is
in DIR instead (this checkout with a change undone, beside uncommitted work of
others). Alternating in one sitting is what makes a small
difference measurable: a virtual machine's speed drifts by more than a build
changes within minutes.

    python bench/engine.py [--size 100000] [--requests 400] [--gap-ms 0] [--against REV]
                           [--rounds 3] [--shape short|beam] [--embedder none|local]
                           [--profile FILE]

``--shape beam``: the user's cube holds N BEAM episodes and the agent's its twenty
lessons (``bench/beam_shape.py``, ``bench_engine_beam_{N}``), and the questions are
BEAM's probing questions. ``--embedder local`` (BEAM shape): dense + lexical, the
memories' vectors from ``beam_shape.py``'s cache as far as it goes when the
database is seeded (``bench_engine_beam_dense_{N}``; ``beam_shape.vectors``),
each question embedded by the worker's MiniLM (a repeated one from its cache).
``--profile FILE``: the measured questions' cProfile statistics, written to FILE.

Needs MariaDB from ``make services``. Ends by printing one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from io import BytesIO
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
# the build measured: this checkout, or (``--root``, a child of ``--against``) another
ROOT = Path(sys.argv[sys.argv.index("--root") + 1]) if "--root" in sys.argv else HERE
sys.path[:0] = [str(ROOT), str(HERE / "bench")]
if ROOT != HERE:  # that build alone: an editable install would fill its gaps from this one
    sys.meta_path[:] = [f for f in sys.meta_path
                        if not getattr(f, "__module__", "").startswith("__editable__")]

from machine import machine_ticks, steal_pct  # noqa: E402
from scale_data import question  # noqa: E402

SHAPES = ("short", "beam")

WARM_LIMIT_S = 900


class Discard:
    """The engine publishes nothing; the wiring wants a publisher."""

    async def publish(self, records: Any) -> None:
        return None


async def open_engine(url: str, embedder: str = "none") -> tuple[Any, Any]:
    """The worker's runtime over ``url`` (started) and its ``QueryEngine``, built by the
    worker's wiring, with the worker's garbage-collector tuning."""
    from pydantic import SecretStr

    from streams.memory.agent_configs import StaticAgentConfigs
    from streams.settings import (
        DatabaseSettings,
        EmbeddingSettings,
        QuerySettings,
        RedisSettings,
        Settings,
    )
    from streams.worker.gc_tuning import tune_gc
    from streams.worker.runtime import Runtime
    from streams.worker.wiring import Wiring

    tune_gc()
    settings = Settings(database=DatabaseSettings(url=SecretStr(url)),
                        redis=RedisSettings(url=None),
                        embedding=EmbeddingSettings(kind=embedder),
                        query=QuerySettings(scope_cache_memories=300_000,
                                            scope_hold_max=300_000))
    rt = await Runtime(settings, migrate=False).start()
    engine = Wiring(settings, rt, publisher=Discard(),  # type: ignore[arg-type]
                    agent_configs=StaticAgentConfigs()).query_processor().engine
    return rt, engine


def asker(rng: random.Random, shape: str = "short") -> Callable[[], Any]:
    """The scale mode's questions, one per call, drawn with ``rng`` (``beam``: BEAM's
    probing questions)."""
    from streams.wire.query import MemoryQuery, QueryOptions

    if shape == "beam":
        import beam_shape

        def draw() -> str:
            return beam_shape.question(rng)
    else:
        def draw() -> str:
            return question(rng)

    def ask() -> MemoryQuery:
        return MemoryQuery(tenant_id="bench", user_id="user-0", agent_id="agent-1",
                           message=draw(),
                           options=QueryOptions(include_short_term=False, timeout_ms=10_000))
    return ask


async def warm(engine: Any, ask: Callable[[], Any]) -> float:
    """Ask until both scopes are held (replies come back whole) and no vector graph is
    being built (with an embedder: till then a large scope is scanned, and the build's
    thread would count in the questions' CPU), then 20 more; the seconds it took."""
    from prometheus_client import REGISTRY

    def building() -> bool:
        return bool(REGISTRY.get_sample_value("memstream_vector_graphs_building"))

    start, whole, reply = time.perf_counter(), 0, None
    while whole < 3 or building():
        if time.perf_counter() - start > WARM_LIMIT_S:
            raise SystemExit(f"no whole reply within {WARM_LIMIT_S} s: {reply.warnings}")
        reply = await engine.answer(ask())
        whole = 0 if reply.warnings else whole + 1
        if reply.warnings or whole >= 3:
            await asyncio.sleep(0.5)
    for _ in range(20):
        await engine.answer(ask())
    return time.perf_counter() - start


async def measure(url: str, requests: int, seed: int, gap_s: float, shape: str = "short",
                  embedder: str = "none", profile: str | None = None) -> dict[str, Any]:
    """This process's build: warm, then ``requests`` questions, one at a time, each after
    a pause of ``gap_s`` (``profile``: the questions' cProfile statistics written there)."""
    rt, engine = await open_engine(url, embedder)
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
    try:
        warm_s = await warm(engine, asker(random.Random(seed), shape))
        # the measured questions: the same for every build
        ask = asker(random.Random(seed + 1), shape)
        ticks = machine_ticks()
        cpu, wall = [], []
        digest = hashlib.sha256()
        for _ in range(requests):
            q = ask()
            if gap_s > 0:
                await asyncio.sleep(gap_s)
            if profiler is not None:
                profiler.enable()
            c0, w0 = time.process_time(), time.perf_counter()
            reply = await engine.answer(q)
            cpu.append(1000 * (time.process_time() - c0))
            wall.append(1000 * (time.perf_counter() - w0))
            if profiler is not None:
                profiler.disable()
            digest.update(json.dumps(reply.model_dump(exclude={"latency_ms"}), default=str,
                                     sort_keys=True).encode())
        steal = steal_pct(ticks, machine_ticks())
    finally:
        await rt.stop()
    if profiler is not None and profile:
        profiler.dump_stats(profile)
    return {"cpu_p50_ms": round(statistics.median(cpu), 2), "steal_pct": steal,
            "cpu_mean_ms": round(statistics.mean(cpu), 2),
            "wall_p50_ms": round(statistics.median(wall), 2), "warm_s": round(warm_s, 1),
            "replies": digest.hexdigest()[:16]}


def database(size: int, shape: str = "short", embedder: str = "none") -> str:
    """The name of the database of ``size`` memories per cube of ``shape``."""
    if shape == "short":
        return f"bench_engine_{size}"
    return f"bench_engine_beam_{'dense_' if embedder == 'local' else ''}{size}"


async def seeded(size: int, fresh: bool, shape: str = "short", embedder: str = "none") -> str:
    """The database of ``size`` memories per cube, seeded when missing (or ``fresh``);
    ``embedder`` local (the BEAM shape): with the memories' vectors."""
    import query_scale
    from sqlalchemy import text

    from tests.support.services import drop_database, mysql_cli, mysql_url

    name = database(size, shape, embedder)
    if fresh:
        drop_database(name)
    mysql_cli(f"CREATE DATABASE IF NOT EXISTS {name} CHARACTER SET utf8mb4")
    url = mysql_url(name)
    seeder = query_scale.Seeder(url, size, dense=shape == "beam" and embedder == "local",
                                shape=shape, embedded_at_least=0)  # as far as cached
    try:
        await query_scale.upgrade(seeder.engine)
        seeder.migrated = True
        async with seeder.engine.connect() as conn:
            held = (await conn.execute(text(
                "SELECT COUNT(*) FROM memory WHERE tenant_id = 'bench'"))).scalar_one()
        if held != seeder.memories(size):
            if held:
                raise SystemExit(f"{name} holds {held} memories, not "
                                 f"{seeder.memories(size)}: use --fresh")
            await seeder.grow(size)
    finally:
        await seeder.close()
    return url


def exported(rev: str) -> Path:
    """Build ``rev``'s files under ``.bench/engine/`` (once per commit)."""
    commit = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=HERE,
                            check=True, capture_output=True, text=True).stdout.strip()
    out = HERE / ".bench" / "engine" / commit[:12]
    if not out.is_dir():  # extracted beside it, then renamed: never half there
        archive = subprocess.run(["git", "archive", commit], cwd=HERE, check=True,
                                 capture_output=True).stdout
        part = out.with_name(out.name + ".part")
        shutil.rmtree(part, ignore_errors=True)
        part.mkdir(parents=True)
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(part, filter="data")
        part.rename(out)
    return out


def child(root: Path, url: str, requests: int, seed: int, gap_ms: float = 0.0,
          shape: str = "short", embedder: str = "none", profile: str | None = None,
          ) -> dict[str, Any]:
    """:func:`measure` in a fresh process running the build at ``root``."""
    done = subprocess.run([sys.executable, __file__, "--child", url, "--root", str(root),
                           "--requests", str(requests), "--seed", str(seed),
                           "--gap-ms", str(gap_ms), "--shape", shape, "--embedder", embedder,
                           *(["--profile", profile] if profile else [])],
                          cwd=root, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"the build at {root} failed:\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=100_000, help="memories per cube")
    p.add_argument("--requests", type=int, default=400, help="questions measured per run")
    p.add_argument("--gap-ms", type=float, default=0.0,
                   help="pause before each question (50: as at 20 requests/s)")
    p.add_argument("--against", metavar="REV",
                   help="a git revision to compare with, or a directory holding another "
                        "build's streams/ (a copy of this checkout with some change undone)")
    p.add_argument("--rounds", type=int, default=3, help="runs of each build (with --against)")
    p.add_argument("--seed", type=int, default=9)
    p.add_argument("--fresh", action="store_true", help="seed the database again")
    p.add_argument("--shape", choices=SHAPES, default="short",
                   help="the memories and questions (beam: bench/beam_shape.py)")
    p.add_argument("--embedder", choices=["none", "local"], default="none",
                   help="local: dense + lexical (the BEAM shape only)")
    p.add_argument("--profile", metavar="FILE",
                   help="write the measured questions' cProfile statistics (this build: "
                        "FILE; with --against, FILE.REV too, each round's last)")
    p.add_argument("--child", metavar="URL", help=argparse.SUPPRESS)
    p.add_argument("--root", help=argparse.SUPPRESS)  # read before the imports, above
    args = p.parse_args()
    if args.embedder == "local" and args.shape != "beam":
        p.error("--embedder local needs --shape beam")
    if args.child:
        print(json.dumps(asyncio.run(measure(args.child, args.requests, args.seed,
                                             args.gap_ms / 1000, args.shape, args.embedder,
                                             args.profile))))
        return
    if args.profile:  # the children run in their builds' directories
        args.profile = str(Path(args.profile).resolve())
    url = asyncio.run(seeded(args.size, args.fresh, args.shape, args.embedder))
    builds = {"this build": HERE}
    if args.against:
        other = (Path(args.against).resolve() if Path(args.against).is_dir()
                 else exported(args.against))
        builds = {args.against: other, **builds}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in builds}
    for r in range(args.rounds if args.against else 1):
        for name, root in builds.items():
            profile = (None if not args.profile else args.profile if root == HERE
                       else f"{args.profile}.{Path(name).name}")
            got = child(root, url, args.requests, args.seed, args.gap_ms, args.shape,
                        args.embedder, profile)
            runs[name].append(got)
            print(f"round {r + 1} {name}: cpu p50 {got['cpu_p50_ms']} ms, mean "
                  f"{got['cpu_mean_ms']} ms, wall p50 {got['wall_p50_ms']} ms, "
                  f"steal {got['steal_pct']} %", file=sys.stderr)
    digests = {got["replies"] for rs in runs.values() for got in rs}
    print(json.dumps({
        "size": args.size, "shape": args.shape, "embedder": args.embedder,
        "requests": args.requests, "gap_ms": args.gap_ms, "runs": runs,
        "cpu_p50_ms": {name: [g["cpu_p50_ms"] for g in rs] for name, rs in runs.items()},
        "replies_identical": len(digests) == 1,
        "machine": f"{os.cpu_count()} cpu, load average {os.getloadavg()[0]:.2f}",
    }))


if __name__ == "__main__":
    main()
