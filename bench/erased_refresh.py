"""Bringing a held cube forward after memories were erased before this worker heard.

Two workers' runtimes on a fresh MariaDB database (``tests.support``): worker one
writes one user's cube of N short memories and erases them one at a time with the
real executor; worker two holds the cube and, after each erasure and before reading
the erasure log, brings its state forward (``ScopeCache._delta`` and ``_apply``: the
valid count fell by one, no memory was closed, so the erased id is looked for).
Printed per erasure: the wall time of the delta and the CPU time of the thread
running it (the event loop's: what every other request on that loop waits for).

    python bench/erased_refresh.py [--memories 18000] [--erasures 8]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import select

from streams.adapters.db.schema.memory import memory_scope_stats
from streams.wire.erasure import ErasureRequest
from tests.integration.test_erasure_held_scopes import hold_loud, two_runtimes


async def main(memories: int, erasures: int) -> None:
    async with two_runtimes("ms_erased_") as (one, two):
        ids, executor, cache = await hold_loud(one, two, memories)
        (sid, state), = cache._states.items()
        wall, cpu = [], []
        for k in range(erasures):
            receipt = await executor.erase(ErasureRequest(
                erasure_id=f"m-{k}", tenant_id="loud", target="memory",
                memory_id=ids[(k + 1) * len(ids) // (erasures + 1)]))
            assert receipt.status == "done"
            t, c = time.perf_counter(), time.thread_time()
            async with cache.engine.connect() as conn:
                stats = (await conn.execute(select(memory_scope_stats).where(
                    memory_scope_stats.c.id == sid))).one()
                delta = await cache._delta(conn, state, stats)
            wall.append((time.perf_counter() - t) * 1000)
            cpu.append((time.thread_time() - c) * 1000)
            assert delta is not None and len(delta.gone) == 1
            cache._apply(state, delta)
        print(f"{memories} memories held, {erasures} erasures: delta wall ms "
              f"median {statistics.median(wall):.1f} max {max(wall):.1f}; loop CPU ms "
              f"median {statistics.median(cpu):.1f} max {max(cpu):.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=18_000)
    parser.add_argument("--erasures", type=int, default=8)
    args = parser.parse_args()
    asyncio.run(main(args.memories, args.erasures))
