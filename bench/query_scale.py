"""The query benchmark's scale mode: latency and memory as one user's cubes grow.

One database, grown size by size: one user's ``user_profile`` cube and the
agent's cube hold N memories each (``bench/scale_data.py``: the same N texts
in both, so one embedding of them serves both cubes; memory ``i`` is the same
at every size, so growing to the next size only adds). Their vectors are
MiniLM's as far as they were embedded and cached, beyond that embedded ones
with noise (``scale_data.scale_vectors``; ``vectors_embedded`` in the output). At each size a fresh
worker per embedder (``none``: lexical; ``local``: dense + lexical, MiniLM)
answers that user's questions sent open-loop at ``--rate`` through Kafka.
Before the measurement the worker is warmed as a running service would be:
one question of a user and an agent with no memories loads the libraries
and the model (the worker's resident memory is read then, from ``/proc``),
then one user's questions at 2/s until the worker reports both scopes held
and no vector graph being built (its ``/metrics``), then 20 more. Resident
memory is read again after the measurement: the difference per 100,000
memories held is what a scope costs a worker. A reply with a warning (the
long-term part missed its deadline) counts as degraded.

``--shape beam``: the user's cube holds N BEAM episodes (``bench/beam_shape.py``:
user messages and an assistant's passages of ~600 characters, one session per
BEAM session, the ten chats in turn and then copies of them), the agent's cube
its twenty lessons, and the questions are BEAM's probing questions. Their
vectors are MiniLM's for every BEAM episode embedded (``beam_shape.py
--embed``), a later copy's its episode's plus noise. *MB/100k* is then per
100,000 memories of the N + 20 held.

    python bench/query.py --scale [--sizes 1000,10000,100000] [--rate 20]
                          [--embedders none,local] [--shape short|beam]
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
from pydantic import SecretStr

from streams.memory.provider import ModelCaller

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import beam_shape  # noqa: E402
from scale_data import scale_text, scale_vectors  # noqa: E402

from streams.adapters.db.engine import create_engine  # noqa: E402
from streams.adapters.db.migrate import upgrade  # noqa: E402
from streams.adapters.embeddings.embedders import MODEL_NAME  # noqa: E402
from streams.memory.model import MemoryCandidate, agent_cube  # noqa: E402
from streams.memory.provider import Scope  # noqa: E402
from streams.memory.providers.builtin.provider import BuiltinProvider  # noqa: E402
from streams.settings import DatabaseSettings  # noqa: E402

BATCH = 2000
SCOPE = Scope("bench", "user-0", "agent-1")
# one question of (user id, agent id); whether the reply was whole
Ask = Callable[..., Awaitable[bool]]


class Precomputed:
    """The local model's vectors of the scale texts, from the cache of ``scale_data``."""

    name = MODEL_NAME

    def __init__(self, vectors: npt.NDArray[np.float32]) -> None:
        self.vectors = vectors
        self.dim = int(vectors.shape[1])
        self.table: dict[str, int] = {}

    async def embed(self, texts: list[str], *,
                    caller: ModelCaller | None = None) -> list[list[float]]:
        return [self.vectors[self.table[t]].tolist() for t in texts]


class Seeder:
    """The scale database, grown to each size in turn through the built-in provider.
    ``shape``: ``short`` (``scale_data``: the same N texts in both cubes) or ``beam``
    (``beam_shape``: the user's cube N BEAM episodes, one ``add`` per session as
    consolidation stores them; the agent's cube its twenty lessons)."""

    def __init__(self, url: str, largest: int, *, dense: bool, shape: str = "short",
                 embedded_at_least: int | None = None) -> None:
        """``embedded_at_least``: BEAM episodes embedded first (when not cached; every one
        unless given)."""
        self.engine = create_engine(DatabaseSettings(url=SecretStr(url)))
        self.shape = shape
        self.vectors, self.embedded = None, 0
        if dense and shape == "beam":
            at_least = len(beam_shape.base()) if embedded_at_least is None else embedded_at_least
            self.embedded = beam_shape.vectors([0], at_least)[1]
            self.vectors = Precomputed(np.zeros((0, 384), dtype=np.float32))
        elif dense:
            matrix, self.embedded = scale_vectors(largest)
            self.vectors = Precomputed(matrix)
        self.provider = BuiltinProvider(self.engine, embedder=self.vectors)
        self.held = 0
        self.migrated = False

    def memories(self, n: int) -> int:
        """The memories both cubes hold at size ``n``."""
        return n + len(beam_shape.LESSONS) if self.shape == "beam" else 2 * n

    async def grow(self, n: int) -> float:
        """Memories ``held`` .. ``n`` of both cubes added; seconds taken."""
        if not self.migrated:
            await upgrade(self.engine)
            self.migrated = True
        start = time.perf_counter()
        if self.shape == "beam":
            await self._grow_beam(n, start)
            self.held = n
            return time.perf_counter() - start
        t0 = datetime(2025, 1, 1, tzinfo=UTC)
        for cube, kind, scope in ((agent_cube("agent-1"), "skill", "agent"),
                                  ("user_profile", "text", "user")):
            for lo in range(self.held, n, BATCH):
                texts = [scale_text("user", i) for i in range(lo, min(n, lo + BATCH))]
                if self.vectors is not None:
                    self.vectors.table = {t: lo + j for j, t in enumerate(texts)}
                await self.provider.add(SCOPE, cube, [
                    MemoryCandidate(content=t, type=kind, scope=scope,  # type: ignore[arg-type]
                                    importance=0.5, event_time=t0 + timedelta(minutes=lo + j),
                                    source_event_ids=(f"{cube}-e{lo + j}",))
                    for j, t in enumerate(texts)])
            print(f"  seeded {cube}: {n:,} memories ({time.perf_counter() - start:.0f} s)",
                  file=sys.stderr, flush=True)
        self.held = n
        return time.perf_counter() - start

    async def _grow_beam(self, n: int, start: float) -> None:
        if not self.held:
            lessons = [beam_shape.lesson(i) for i in range(len(beam_shape.LESSONS))]
            await add_beam(self.provider, self.vectors, SCOPE, agent_cube("agent-1"), lessons)
        for lo in range(self.held, n, BATCH):
            await add_episodes(self.provider, self.vectors, SCOPE,
                               beam_shape.episodes(0, lo, min(n, lo + BATCH)), lo)
        print(f"  seeded user_profile: {n:,} BEAM memories ({time.perf_counter() - start:.0f} s)",
              file=sys.stderr, flush=True)

    async def close(self) -> None:
        await self.engine.dispose()


async def add_beam(provider: BuiltinProvider, vectors: Precomputed | None, scope: Scope,
                   cube: str, memories: list[MemoryCandidate], places: list[int] | None = None,
                   session_key: str | None = None) -> None:
    """``memories`` added in one call, with their vectors (``places``: theirs in the BEAM
    streams, :func:`beam_shape.vectors`; none: each text's own, embedded now)."""
    if vectors is not None:
        if places is None:
            from streams.adapters.embeddings.embedders import LocalEmbedder

            vectors.vectors = LocalEmbedder().encode([m.content for m in memories])
        else:
            vectors.vectors = beam_shape.vectors(places)[0]
        vectors.table = {m.content: j for j, m in enumerate(memories)}
    await provider.add(scope, cube, memories, session_key=session_key)


async def add_episodes(provider: BuiltinProvider, vectors: Precomputed | None, scope: Scope,
                       episodes: list[beam_shape.Episode], first: int, offset: int = 0) -> None:
    """BEAM episodes ``first`` .. of the stream at ``offset`` into the scope's
    ``user_profile``, one ``add`` per session (the session's key given: a session split
    between two calls stays one)."""
    at = offset + first
    for key, run in beam_shape.by_session(episodes):
        await add_beam(provider, vectors, scope, "user_profile", [e.candidate for e in run],
                       list(range(at, at + len(run))), session_key=key)
        at += len(run)


def cpu_s(pid: int) -> float:
    """CPU seconds the process has used (user and system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"VmRSS:\s+(\d+) kB", status)
    return int(found.group(1)) / 1024 if found else 0.0


async def gauges(port: int) -> dict[str, float]:
    async with httpx.AsyncClient(timeout=5) as http:
        text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    out = {}
    for name in ("memstream_scope_cache_memories", "memstream_vector_graphs_building"):
        found = re.search(rf"^{name} (\S+)$", text, re.M)
        out[name] = float(found.group(1)) if found else 0.0
    return out


async def warm(ask: Ask, port: int, held: int, limit_s: float) -> float:
    """Ask at 2/s until both scopes are held (``held`` memories in all) and no graph is
    being built, then 20 more; seconds taken."""
    start = time.perf_counter()
    while time.perf_counter() - start < limit_s:
        await ask(SCOPE.user_id)
        g = await gauges(port)
        if (g["memstream_scope_cache_memories"] >= held
                and g["memstream_vector_graphs_building"] == 0):
            break
        await asyncio.sleep(0.5)
    for _ in range(20):
        await ask(SCOPE.user_id)
    return time.perf_counter() - start


def table(rows: list[dict[str, Any]]) -> str:
    """The curve as printed (and copied into docs/benchmarks.md)."""
    lines = ["memories/cube  retrieval  p50 ms  p95 ms  p99 ms  engine p50  outside p50  "
             "degraded  rate/s  cpu ms/q  warm s  MB/100k  steal %"]
    for r in rows:
        kind = "lexical" if r["embedder"] == "none" else "dense+lex"
        lines.append(f"{r['memories_per_cube']:>13,}  {kind:>9}  {r['p50_ms']:>6}  "
                     f"{r['p95_ms']:>6}  {r['p99_ms']:>6}  {r['engine_p50_ms']:>10}  "
                     f"{r['outside_p50_ms']:>11}  {r['errors']:>8}  "
                     f"{r['achieved_rate']:>6}  {r['worker_cpu_ms_per_query']:>8}  "
                     f"{r['warm_s']:>6}  {r['mb_per_100k']:>7}  {r['steal_pct']:>7}")
    return "\n".join(lines)
