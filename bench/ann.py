"""Approximate nearest neighbours for the dense signal: candidates measured side by side.

For each library: the time to build an index of N vectors (one thread), its
memory (resident set growth), the latency of one query for the best ``k``
(one thread, as the worker asks: one question at a time) and the recall of
that answer against the exact top ``k`` (a matrix product), at k = 10 and at
k = 200 (the candidates a search takes from each signal).

The vectors are the MiniLM embeddings of the query benchmark's scale-mode
memories (``bench/scale_data.py``; embedded once and cached), and the
queries the embeddings of its questions. Beyond the memories embedded so far
(``scale_data.scale_vectors``; ``embedded`` in the output) the vectors are
embedded ones plus Gaussian noise of the spread of the embedded set,
renormalised.

    python bench/ann.py --n 100000 [--queries 300] [--libs usearch,faiss,voyager]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from scale_data import PLACES, TOPICS, scale_vectors  # noqa: E402

Matrix = npt.NDArray[np.float32]
Search = Callable[[Matrix, int], npt.NDArray[np.int64]]


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def build_usearch(data: Matrix, m: int, ef_c: int, ef: int, dtype: str) -> Search:
    from usearch.index import Index

    index = Index(ndim=data.shape[1], metric="ip", dtype=dtype, connectivity=m,
                  expansion_add=ef_c, expansion_search=ef)
    index.add(np.arange(len(data), dtype=np.uint64), data, threads=1)

    def search(q: Matrix, k: int) -> npt.NDArray[np.int64]:
        return np.asarray(index.search(q, max(k, 1), threads=1).keys, dtype=np.int64)

    search.index = index  # type: ignore[attr-defined]  # kept alive
    return search


def build_faiss(data: Matrix, m: int, ef_c: int, ef: int, dtype: str) -> Search:
    import faiss

    faiss.omp_set_num_threads(1)
    index = faiss.IndexHNSWFlat(data.shape[1], m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = ef_c
    index.add(data)

    def search(q: Matrix, k: int) -> npt.NDArray[np.int64]:
        index.hnsw.efSearch = max(ef, k)
        _, ids = index.search(q[None, :], k)
        return np.asarray(ids[0], dtype=np.int64)

    search.index = index  # type: ignore[attr-defined]
    return search


def build_voyager(data: Matrix, m: int, ef_c: int, ef: int, dtype: str) -> Search:
    from voyager import Index, Space, StorageDataType

    storage = {"f32": StorageDataType.Float32, "f16": StorageDataType.Float8,
               "i8": StorageDataType.E4M3}[dtype]
    index = Index(Space.InnerProduct, num_dimensions=data.shape[1], M=m,
                  ef_construction=ef_c, storage_data_type=storage)
    index.add_items(data, np.arange(len(data)), num_threads=1)

    def search(q: Matrix, k: int) -> npt.NDArray[np.int64]:
        ids, _ = index.query(q, k=k, query_ef=max(ef, k))
        return np.asarray(ids, dtype=np.int64)

    search.index = index  # type: ignore[attr-defined]
    return search


BUILDERS = {"usearch": build_usearch, "faiss": build_faiss, "voyager": build_voyager}


def questions(n: int) -> list[str]:
    rng = random.Random(9)
    return [f"what about {rng.choice(TOPICS)} and {rng.choice(TOPICS)} in {rng.choice(PLACES)}?"
            for _ in range(n)]


def measure(name: str, data: Matrix, queries: Matrix, exact: dict[int, list[set[int]]],
            args: argparse.Namespace) -> dict[str, Any]:
    gc.collect()
    before = rss_mb()
    t0 = time.perf_counter()
    search = BUILDERS[name](data, args.m, args.ef_construction, args.ef, args.dtype)
    build_s = time.perf_counter() - t0
    memory = rss_mb() - before
    out: dict[str, Any] = {"library": name, "build_s": round(build_s, 1),
                           "index_mb": round(memory, 1)}
    for k, truth in exact.items():
        lat, hits = [], 0
        for q, want in zip(queries, truth, strict=True):
            t = time.perf_counter()
            got = search(q, k)
            lat.append((time.perf_counter() - t) * 1000)
            hits += len(want & set(got.tolist()))
        lat.sort()
        out[f"recall_at_{k}"] = round(hits / (k * len(queries)), 4)
        out[f"p50_ms_k{k}"] = round(lat[len(lat) // 2], 3)
        out[f"p99_ms_k{k}"] = round(lat[int(len(lat) * 0.99)], 3)
    del search
    gc.collect()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--libs", default="usearch,faiss,voyager")
    ap.add_argument("--m", type=int, default=16, help="graph degree (HNSW M)")
    ap.add_argument("--ef-construction", type=int, default=128)
    ap.add_argument("--ef", type=int, default=256, help="search breadth (at least k)")
    ap.add_argument("--dtype", default="f32", help="usearch/voyager storage: f32, f16, i8")
    args = ap.parse_args()
    from streams.adapters.embeddings.embedders import LocalEmbedder, limit_blas_threads

    data, embedded = scale_vectors(args.n)
    data = np.ascontiguousarray(data)
    model = LocalEmbedder()
    queries = model.encode(questions(args.queries))
    limit_blas_threads(1)
    lat = []
    exact: dict[int, list[set[int]]] = {10: [], 200: []}
    for q in queries:
        t = time.perf_counter()
        sims = data @ q
        top = np.argpartition(-sims, 200)[:200]
        lat.append((time.perf_counter() - t) * 1000)
        top = top[np.argsort(-sims[top])]
        exact[10].append(set(top[:10].tolist()))
        exact[200].append(set(top.tolist()))
    lat.sort()
    results = [{"library": "exact (numpy matrix product)", "recall_at_10": 1.0,
                "recall_at_200": 1.0, "p50_ms_k200": round(lat[len(lat) // 2], 3),
                "p99_ms_k200": round(lat[int(len(lat) * 0.99)], 3),
                "index_mb": round(data.nbytes / 2**20, 1)}]
    for name in args.libs.split(","):
        results.append(measure(name, data, queries, exact, args))
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    print(json.dumps({"n": args.n, "dim": int(data.shape[1]), "m": args.m,
                      "ef_construction": args.ef_construction, "ef": args.ef,
                      "dtype": args.dtype, "embedded": embedded,
                      "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                          / 1024, 1),
                      "results": results}))


if __name__ == "__main__":
    main()
