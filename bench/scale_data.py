"""The memories of the query benchmark's scale mode, and their vectors cached on disk.

Memory ``i`` of a cube is a function of the cube and ``i`` alone, so the cubes
of 1,000 memories are the first 1,000 of the cubes of 100,000, and vectors
embedded once (with the local MiniLM, ``.bench/scale-vectors-*.npy``) serve
every later run and every size up to the largest embedded.

    python bench/scale_data.py --embed 100000     # fill the vector cache ahead of a run
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".bench"

TOPICS = [
    "trip", "hotel", "flight", "museum", "dinner", "budget", "sister", "vegetarian", "walking",
    "beach", "train", "ticket", "morning", "weather", "booking", "price", "river", "market",
    "coffee", "book", "concert", "guitar", "garden", "painting", "running", "yoga", "cooking",
    "spanish", "french", "camera", "bicycle", "piano", "chess", "hiking", "wine", "cheese",
    "football", "tennis", "swimming", "podcast", "novel", "poetry", "theatre", "cinema",
]
PLACES = ["Lisbon", "Porto", "Madrid", "Berlin", "Oslo", "Kyoto", "Lima", "Quito", "Austin",
          "Denver", "Perth", "Cairo"]
VERBS = ("likes", "visited", "prefers", "bought", "planned", "talked about", "learned",
         "booked", "enjoys", "avoids")


def question(rng: random.Random) -> str:
    """A question of the query benchmark (``bench/query.py``, ``bench/engine.py``)."""
    return f"what about {rng.choice(TOPICS)} and {rng.choice(TOPICS)} in {rng.choice(PLACES)}?"


def memory_text(rng: random.Random, who: str, i: int) -> str:
    t1, t2 = rng.sample(TOPICS, 2)
    return (f"{who} {rng.choice(VERBS)} {t1} in {rng.choice(PLACES)} "
            f"and mentioned {t2} (note {i}).")


def scale_text(cube: str, i: int) -> str:
    """Memory ``i`` of the scale mode's ``cube`` (``user`` or ``agent``)."""
    who = "The user" if cube == "user" else "The agent"
    return memory_text(random.Random(f"{cube}:{i}"), who, i)


def cached_vectors(cube: str, n: int) -> npt.NDArray[np.float32] | None:
    """The vectors of the first ``n`` memories of ``cube``, if a cache holds that many."""
    best = None
    for path in CACHE.glob(f"scale-vectors-{cube}-*.npy"):
        size = int(path.stem.rsplit("-", 1)[1])
        if size >= n and (best is None or size < best[0]):
            best = (size, path)
    if best is None:
        return None
    return np.load(best[1], mmap_mode="r")[:n]


def embed(cube: str, n: int, batch: int = 2000, keep_every: int = 10_000,
          text: Callable[[int], str] | None = None) -> npt.NDArray[np.float32]:
    """The vectors of the first ``n`` memories of ``cube``: from the cache, or embedded
    now (MiniLM on the CPU, ~150 texts/s on a quiet machine here) and cached, the
    part done kept every ``keep_every`` (a stopped run resumes from it). ``text``:
    memory ``i``'s text (:func:`scale_text` of ``cube`` unless given; ``cube`` then only
    names the cache, as ``bench/beam_shape.py`` does)."""
    held = cached_vectors(cube, n)
    if held is not None:
        return np.asarray(held, dtype=np.float32)
    sys.path.insert(0, str(ROOT))
    from streams.adapters.embeddings.embedders import LocalEmbedder

    model = LocalEmbedder()
    out = np.zeros((n, model.dim), dtype=np.float32)
    done = largest_cached(cube)
    if done:
        done = min(done, n)
        out[:done] = np.asarray(cached_vectors(cube, done), dtype=np.float32)
    start = time.perf_counter()
    for lo in range(done, n, batch):
        hi = min(n, lo + batch)
        out[lo:hi] = model.encode([text(i) if text is not None else scale_text(cube, i)
                                   for i in range(lo, hi)])
        print(f"  embedded {hi}/{n} {cube} memories ({time.perf_counter() - start:.0f} s)",
              file=sys.stderr, flush=True)
        if hi % keep_every == 0 or hi == n:
            keep(cube, out[:hi])
    return out


def scale_vectors(n: int, embedded_at_least: int = 10_000, seed: int = 7,
                  ) -> tuple[npt.NDArray[np.float32], int]:
    """Vectors of the first ``n`` memories, and how many of them are their text's own:
    the embedded ones (the cache's prefix, embedding at least ``embedded_at_least``
    first), then each further memory a copy of a random embedded vector plus Gaussian
    noise of half the set's spread, renormalised (a cosine of ~0.9 with it). Embedding
    100,000 texts takes ~11 minutes on a quiet machine here and over an hour on a busy
    one; what the vectors serve (graph and scan latency, recall against the exact
    scan) needs their number and spread, not their meaning."""
    done = min(n, largest_cached("user"))
    if done < min(n, embedded_at_least):
        done = min(n, embedded_at_least)
        embed("user", done)
    real = np.asarray(cached_vectors("user", done), dtype=np.float32)
    if done == n:
        return real, n
    out = np.empty((n, real.shape[1]), dtype=np.float32)
    out[:done] = real
    rng = np.random.default_rng(seed)
    spread = float(real.std())
    for lo in range(done, n, 100_000):
        hi = min(n, lo + 100_000)
        part = real[rng.integers(0, done, hi - lo)]
        part += rng.normal(0, spread / 2, part.shape).astype(np.float32)
        part /= np.linalg.norm(part, axis=1, keepdims=True)
        out[lo:hi] = part
    return out, done


def largest_cached(cube: str) -> int:
    return max((int(p.stem.rsplit("-", 1)[1]) for p in CACHE.glob(f"scale-vectors-{cube}-*.npy")),
               default=0)


def keep(cube: str, vectors: npt.NDArray[np.float32]) -> None:
    """Cache ``vectors`` as the first ones of ``cube``, in place of any shorter cache."""
    CACHE.mkdir(exist_ok=True)
    path = CACHE / f"scale-vectors-{cube}-{len(vectors)}.npy"
    partial = CACHE / f"partial-{cube}.npy"  # written whole, then renamed
    np.save(partial, vectors)
    partial.replace(path)
    for old in CACHE.glob(f"scale-vectors-{cube}-*.npy"):
        if old != path and int(old.stem.rsplit("-", 1)[1]) < len(vectors):
            old.unlink()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--embed", type=int, required=True, help="memories per cube")
    args = ap.parse_args()
    embed("user", args.embed)  # both cubes hold the same texts (query_scale.py)
