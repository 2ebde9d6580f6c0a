"""Two versions of a few functions of the engine, alternated question by question.

``bench/engine.py --against REV`` compares two whole builds, each in its own
process; on this machine a process's speed differs from the next one's by more
than a change of a few hundred microseconds does. This compares within one
process instead: the named functions (``path:name`` or ``path:Class.method``) as
they are at git revision REV and as they are in this checkout take turns, one
question each, every question after a pause (``--gap-ms``, 50: as a worker
answering 20 requests a second meets them). The revision's modules are compiled
from its files beside this build's; where one of them uses a name of another
module also taken from the revision, it gets the revision's. The functions named
must keep their signatures between the two.

Reported: CPU per question (mean and p50, ``time.thread_time``) of each version
and the difference of the means; then the first 60 questions asked of both, and
how many replies differ (every field but ``latency_ms``).

    python bench/engine_swap.py REV streams/query/rules/budget.py:_one_line \\
        streams/query/rules/same_source.py:fold_same_source \\
        streams/query/engine.py:fold_same_source [--requests 800] [--gap-ms 50]

The data and the questions are ``bench/engine.py``'s (``bench_engine_{size}``); the
two versions answer every other one of them each.
Needs MariaDB from ``make services``. Ends by printing one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import json
import random
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(HERE), str(HERE / "bench")]

from engine import asker, open_engine, seeded, warm  # noqa: E402


def revision_module(rev: str, path: str) -> types.ModuleType:
    """The module at ``path`` as it is at ``rev``, compiled under a name of its own."""
    source = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=HERE, check=True,
                            capture_output=True, text=True).stdout
    name = f"at_{rev}_{path[:-3].replace('/', '_')}"
    module = types.ModuleType(name)
    module.__file__ = f"{rev}:{path}"
    sys.modules[name] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def swaps(rev: str, specs: list[str]) -> list[tuple[Any, str, Any, Any]]:
    """``(owner, attribute, this build's, the revision's)`` of each ``path:dotted`` name."""
    olds: dict[str, types.ModuleType] = {}
    for spec in specs:
        path = spec.split(":")[0]
        olds.setdefault(path[:-3].replace("/", "."), revision_module(rev, path))
    for old in olds.values():  # the revision's modules use each other's names
        for name, value in list(vars(old).items()):
            home = getattr(value, "__module__", None)
            if home in olds and olds[home] is not old and hasattr(olds[home], name):
                setattr(old, name, getattr(olds[home], name))
    out = []
    for spec in specs:
        path, dotted = spec.split(":")
        *owners, attr = dotted.split(".")
        new: Any = importlib.import_module(path[:-3].replace("/", "."))
        old: Any = olds[path[:-3].replace("/", ".")]
        for o in owners:
            new, old = getattr(new, o), getattr(old, o)
        out.append((new, attr, inspect.getattr_static(new, attr),
                    inspect.getattr_static(old, attr)))
    return out


async def measure(url: str, pairs: list[tuple[Any, str, Any, Any]], requests: int,
                  gap_s: float, seed: int) -> dict[str, Any]:
    def use(new: bool) -> None:
        for owner, attr, mine, theirs in pairs:
            setattr(owner, attr, mine if new else theirs)

    rt, engine = await open_engine(url)
    try:
        await warm(engine, asker(random.Random(seed)))
        ask = asker(random.Random(seed + 1))  # bench/engine.py's measured questions
        questions = [ask() for _ in range(requests)]
        cpu: dict[bool, list[float]] = {False: [], True: []}
        for i, q in enumerate(questions):
            use(i % 2 == 1)
            await asyncio.sleep(gap_s)
            c0 = time.thread_time()
            await engine.answer(q)
            cpu[i % 2 == 1].append(1000 * (time.thread_time() - c0))
        differ, compared = 0, questions[:60]
        for q in compared:
            replies = []
            for new in (False, True):
                use(new)
                replies.append((await engine.answer(q)).model_dump(exclude={"latency_ms"}))
            differ += replies[0] != replies[1]
    finally:
        await rt.stop()
    return {which: {"cpu_mean_ms": round(statistics.mean(xs), 3),
                    "cpu_p50_ms": round(statistics.median(xs), 3), "questions": len(xs)}
            for which, xs in (("revision", cpu[False]), ("this build", cpu[True]))} | {
        "difference_ms": round(statistics.mean(cpu[True]) - statistics.mean(cpu[False]), 3),
        "replies_differing": f"{differ} of {len(compared)}"}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("rev", help="the git revision of the other version")
    p.add_argument("names", nargs="+", help="path:function or path:Class.method")
    p.add_argument("--requests", type=int, default=800, help="questions, half each")
    p.add_argument("--gap-ms", type=float, default=50.0, help="pause before each question")
    p.add_argument("--size", type=int, default=100_000, help="memories per cube")
    p.add_argument("--seed", type=int, default=9)
    args = p.parse_args()
    url = asyncio.run(seeded(args.size, False))
    got = asyncio.run(measure(url, swaps(args.rev, args.names), args.requests,
                              args.gap_ms / 1000, args.seed))
    for which in ("revision", "this build"):
        print(f"{which}: cpu mean {got[which]['cpu_mean_ms']} ms, p50 "
              f"{got[which]['cpu_p50_ms']} ms", file=sys.stderr)
    print(json.dumps({"rev": args.rev, "names": args.names, "gap_ms": args.gap_ms, **got}))


if __name__ == "__main__":
    main()
