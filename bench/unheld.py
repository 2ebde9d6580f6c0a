"""A search of a scope held whole against one over the ceiling (read per query).

One user's cube of N memories (``scale_data``'s texts) on a fresh MariaDB database,
searched by the built-in provider in process (no Kafka): once by a provider that holds
the scope (warmed first: loaded, its graph built), once by one whose
``scope_hold_max`` is below N (``streams/memory/providers/builtin/unheld.py``). The
vectors are 384-dimensional unit vectors drawn from each text's hash: what is timed
(reading and multiplying them) needs their number and size, not their meaning; the
query vector is ready before the search starts, as a cached question's is.

With ``--facts F`` the cube is a heavy user's: F facts, then N episodes (every
memory else), and what is timed is a consolidation's conflict check, a search of
facts only (``kinds=("fact",)``, ``top_k`` 5).

    python bench/unheld.py [--sizes 20000,100000] [--questions 200] [--lexical]
                           [--facts 300]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from pydantic import SecretStr

from streams.memory.provider import ModelCaller

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from scale_data import question, scale_text  # noqa: E402

from streams.adapters.db.engine import create_engine  # noqa: E402
from streams.adapters.db.migrate import upgrade  # noqa: E402
from streams.memory.model import USER_CUBE, MemoryCandidate  # noqa: E402
from streams.memory.provider import Scope, SearchRequest  # noqa: E402
from streams.memory.providers.builtin.provider import BuiltinProvider  # noqa: E402
from streams.settings import DatabaseSettings  # noqa: E402
from tests.support.services import create_database, drop_database, unique  # noqa: E402

SCOPE = Scope("bench", "user-0", "agent-1")
BATCH = 2000


class HashVectors:
    name = "hash-384"
    dim = 384

    async def embed(self, texts: Sequence[str], *,
                    caller: ModelCaller | None = None) -> list[list[float]]:
        out = []
        for t in texts:
            rng = np.random.default_rng(int(hashlib.sha1(t.encode()).hexdigest()[:12], 16))
            v = rng.standard_normal(self.dim)
            out.append((v / np.linalg.norm(v)).tolist())
        return out


FACTS_ONLY = SearchRequest(query="", cubes=[USER_CUBE], top_k=5, relativity=0.0,
                           include_preference=True, dedup=False, kinds=("fact",))
"""The shape of a consolidation's conflict check (``MemoryWriter._related``)."""


async def timed(p: BuiltinProvider, questions: list[str], facts: bool = False) -> list[float]:
    out = []
    for q in questions:
        request = (replace(FACTS_ONLY, query=q) if facts
                   else SearchRequest(query=q, cubes=[USER_CUBE], top_k=10))
        start = time.perf_counter()
        await p.search(SCOPE, request)
        out.append(1000 * (time.perf_counter() - start))
    return out


def line(n: int, retrieval: str, path: str, ms: list[float]) -> str:
    q = statistics.quantiles(ms, n=100)
    return (f"| {n:,} | {retrieval} | {path} | {statistics.median(ms):.1f} ms | "
            f"{q[94]:.1f} ms | {q[98]:.1f} ms |")


def facts(n: int, t0: datetime) -> list[MemoryCandidate]:
    return [MemoryCandidate(
        content=f"I prefer {scale_text('user', 10**6 + i)}", type="preference", scope="user",
        importance=0.6, event_time=t0, source_event_ids=(f"f{i}",)) for i in range(n)]


async def main(args: argparse.Namespace) -> None:
    name = unique("ms_unheld_bench_")
    url = create_database(name)
    engine = create_engine(DatabaseSettings(url=SecretStr(url)))
    embedder = None if args.lexical else HashVectors()
    retrieval = "lexical" if args.lexical else "dense + lexical"
    kind = "episode" if args.facts else "fact"
    if args.facts:
        retrieval += f", facts of {args.facts:,}"
    rng = random.Random(3)
    questions = [("I prefer " if args.facts else "") + question(rng)
                 for _ in range(args.questions)]
    try:
        await upgrade(engine)
        seeder = BuiltinProvider(engine, embedder=embedder)
        t0, done = datetime(2025, 1, 1, tzinfo=UTC), 0
        if args.facts:
            await seeder.add(SCOPE, USER_CUBE, facts(args.facts, t0))
        print("| memories | retrieval | path | p50 | p95 | p99 |\n|---|---|---|---|---|---|")
        for n in sorted(int(s) for s in args.sizes.split(",")):
            for lo in range(done, n, BATCH):
                await seeder.add(SCOPE, USER_CUBE, [MemoryCandidate(
                    content=scale_text("user", i), type="text", scope="user", importance=0.5,
                    event_time=t0 + timedelta(minutes=i), source_event_ids=(f"e{i}",),
                    kind=kind)
                    for i in range(lo, min(n, lo + BATCH))])
            done = n
            held = BuiltinProvider(engine, embedder=embedder, vector_cache_rows=2 * n,
                                   ann_min_vectors=20_000)
            await timed(held, questions[:3])  # loads the scope
            await held.cache.indexed()
            await timed(held, questions[:20], bool(args.facts))
            unheld = BuiltinProvider(engine, embedder=embedder, scope_hold_max=n // 2)
            await timed(unheld, questions[:20], bool(args.facts))
            for label, p in (("held", held), ("not held", unheld)):
                ms = await timed(p, questions, bool(args.facts))
                print(line(n, retrieval, label, ms), flush=True)
            assert unheld.cache.held_memories == 0
    finally:
        await engine.dispose()
        drop_database(name)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="20000,100000")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--lexical", action="store_true", help="no embedder")
    parser.add_argument("--facts", type=int, default=0,
                        help="F facts under the N episodes; time searches of facts only")
    asyncio.run(main(parser.parse_args()))
