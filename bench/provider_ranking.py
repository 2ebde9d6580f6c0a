"""How memstream should rank what MemOS and Mem0 return, measured on LoCoMo.

Every turn of each conversation of the LoCoMo file is written, as the episodic
memory ``Speaker: text`` with source id ``<sample_id>:<dia_id>``, to the real
server (``python3 scripts/services.py up memos mem0``) through memstream's own
client; every question of categories 1-4 is then asked of its conversation's
cube. The provider's answer (its order, its scores) is kept once and ranked
offline by :func:`streams.memory.rules.relative.reranked` for each lexical
weight ``w`` of :data:`WEIGHTS`: ``0`` is the provider's order alone, ``1``
memstream's BM25 over the returned memories alone.

Reported per provider and weight: evidence recall@5 and @10 (the share of a
question's evidence turns among the first k) and MRR of the first evidence
turn; then the weight chosen by rotation (for each conversation, the weight
best on the other conversations, scored on the one left out), so the default
is not fitted to the file it is measured on. Also the cost of reading each
MemOS add back (``verify_writes``): add latency with and without it.

The servers' embedder is the project's fake (hashed bag of words), so the
provider's order here is lexical without stemming; with a real embedding model
it carries meaning the BM25 signal does not.

    .venv/bin/python bench/provider_ranking.py [--data FILE] [--providers memos mem0]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streams.devtools.locomo.dataset import Sample, load_samples  # noqa: E402
from streams.memory.model import USER_CUBE, MemoryCandidate, StoredMemory  # noqa: E402
from streams.memory.provider import MemoryProvider, Scope, SearchRequest  # noqa: E402
from streams.memory.providers.mem0 import Mem0Provider  # noqa: E402
from streams.memory.providers.memos import MemOSProvider  # noqa: E402
from streams.memory.rules.relative import LEXICAL_WEIGHT, reranked  # noqa: E402
from tests.support.services import MEM0_PORT, MEMOS_PORT  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "bench" / "locomo-dev.json"
WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)
POOL = 20  # what the query engine asks a provider for (candidate_pool)
URLS = {"memos": f"http://127.0.0.1:{MEMOS_PORT}", "mem0": f"http://127.0.0.1:{MEM0_PORT}"}


@dataclass
class Asked:
    sample_id: str
    query: str
    evidence: frozenset[str]
    answer: list[StoredMemory]  # the provider's order


def client_for(name: str, http: httpx.AsyncClient, *, verify: bool = False) -> MemoryProvider:
    if name == "memos":
        return MemOSProvider(http, URLS[name], timeout_s=60, verify_writes=verify,
                             lexical_weight=0.0)
    return Mem0Provider(http, URLS[name], timeout_s=60, lexical_weight=0.0)


async def load(provider: MemoryProvider, scope: Scope, sample: Sample, workers: int) -> float:
    turns = [(f"{sample.sample_id}:{t.dia_id}", f"{t.speaker}: {t.text}")
             for s in sample.sessions for t in s.turns if t.text.strip()]
    gate = asyncio.Semaphore(workers)
    start = time.perf_counter()

    async def one(source: str, text: str) -> None:
        async with gate:
            await provider.add(scope, USER_CUBE, [MemoryCandidate(
                text, kind="episode", source_event_ids=(source,))])

    await asyncio.gather(*(one(s, t) for s, t in turns))
    return time.perf_counter() - start


async def ask_all(provider: MemoryProvider, scope: Scope, sample: Sample,
                  workers: int) -> list[Asked]:
    gate = asyncio.Semaphore(workers)

    async def one(question: str, evidence: Sequence[str]) -> Asked:
        async with gate:
            found = await provider.search(scope, SearchRequest(
                question, [USER_CUBE], top_k=POOL, relativity=0.0, include_preference=False,
                dedup=False))
        # w = 0 in the client: the provider's order, ranked offline per weight below
        return Asked(sample.sample_id, question,
                     frozenset(f"{sample.sample_id}:{e}" for e in evidence), found)

    return await asyncio.gather(*(one(q.question, q.evidence) for q in sample.questions))


def scores(asked: Sequence[Asked], weight: float) -> tuple[float, float, float]:
    r5, r10, rr = [], [], []
    for a in asked:
        if not a.evidence:
            continue
        ranked = reranked(a.query, a.answer, 0.0, lexical_weight=weight)
        sources = [m.source_event_ids[0] if m.source_event_ids else "" for m in ranked]
        r5.append(len(a.evidence & set(sources[:5])) / len(a.evidence))
        r10.append(len(a.evidence & set(sources[:10])) / len(a.evidence))
        first = next((i for i, s in enumerate(sources) if s in a.evidence), None)
        rr.append(0.0 if first is None else 1.0 / (first + 1))
    return statistics.mean(r5), statistics.mean(r10), statistics.mean(rr)


def rotation(asked: Sequence[Asked]) -> tuple[list[tuple[str, float]], float]:
    """Per conversation left out: the weight best (recall@10) on the others; and
    recall@10 of those choices on the conversations they were not chosen on."""
    samples = sorted({a.sample_id for a in asked})
    chosen, held = [], []
    for out in samples:
        rest = [a for a in asked if a.sample_id != out]
        best = max(WEIGHTS, key=lambda w: (scores(rest, w)[1], -abs(w - LEXICAL_WEIGHT)))
        chosen.append((out, best))
        held.extend((a, best) for a in asked if a.sample_id == out)
    per = [scores([a], w)[1] for a, w in held if a.evidence]
    return chosen, statistics.mean(per)


async def write_cost(http: httpx.AsyncClient, n: int) -> dict[str, float]:
    """p50 / p95 of one MemOS add, with and without reading it back."""
    out: dict[str, float] = {}
    for verify in (False, True):
        provider = MemOSProvider(http, URLS["memos"], timeout_s=60, verify_writes=verify)
        scope = Scope(f"cost{uuid.uuid4().hex[:6]}", "u", "a")
        times = []
        for i in range(n):
            start = time.perf_counter()
            await provider.add(scope, USER_CUBE, [MemoryCandidate(
                f"Memory number {i} about topic {i % 7}.", source_event_ids=(f"e{i}",))])
            times.append((time.perf_counter() - start) * 1000)
        times.sort()
        key = "verified" if verify else "unverified"
        out[f"{key}_p50_ms"] = times[len(times) // 2]
        out[f"{key}_p95_ms"] = times[int(len(times) * 0.95)]
    return out


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--providers", nargs="+", default=["memos", "mem0"],
                        choices=sorted(URLS))
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--write-cost", type=int, default=100,
                        help="MemOS adds timed with and without read-back (0: skip)")
    args = parser.parse_args()
    samples = load_samples(args.data)
    print(f"{len(samples)} conversations, {sum(s.turn_count for s in samples)} turns, "
          f"{sum(len(s.questions) for s in samples)} questions; pool {POOL}")
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=16)) as http:
        for name in args.providers:
            provider = client_for(name, http)
            tenant = f"rank{uuid.uuid4().hex[:6]}"
            asked: list[Asked] = []
            for sample in samples:
                scope = Scope(tenant, sample.sample_id, "a")
                took = await load(provider, scope, sample, args.workers)
                print(f"  {name}: {sample.sample_id} loaded ({sample.turn_count} turns, "
                      f"{took:.0f} s); asking {len(sample.questions)} questions", flush=True)
                asked.extend(await ask_all(provider, scope, sample, args.workers))
            print(f"\n{name}: weight  recall@5  recall@10  MRR")
            for w in WEIGHTS:
                r5, r10, rr = scores(asked, w)
                print(f"{name}:  {w:4.2f}    {r5:6.1%}    {r10:6.1%}   {rr:.3f}")
            chosen, held = rotation(asked)
            print(f"{name}: rotation chose {', '.join(f'{s}: {w}' for s, w in chosen)}; "
                  f"held-out recall@10 {held:.1%}\n")
        if args.write_cost and "memos" in args.providers:
            cost = await write_cost(http, args.write_cost)
            print("memos add, ms: " + ", ".join(f"{k} {v:.1f}" for k, v in cost.items()))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
