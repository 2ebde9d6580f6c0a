"""`make bench-beam`: the BEAM harness on the local services, on a fresh database
and fresh topics, with the local embedder and the rule judge (no model).

    python bench/beam.py [--data DIR] [--embedder local|none] [--chats N] [--table]
                         [--in-flight N | --rate R]

``--data`` is a folder of chat folders (``chat.json``, ``probing_questions.json``),
``../shared/bench/beam-100k`` by default. Prints the harness's progress on
stderr and one JSON line (or, with ``--table``, the table) on stdout.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.harness_env import harness_env  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "bench" / "beam-100k"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--embedder", choices=["local", "none"], default="local")
    ap.add_argument("--chats", type=int, default=None, help="only the first N chats")
    ap.add_argument("--table", action="store_true", help="print the table instead of JSON")
    arrivals = ap.add_mutually_exclusive_group()
    arrivals.add_argument("--in-flight", type=int, default=None,
                          help="questions asked at once (closed loop; 4)")
    arrivals.add_argument("--rate", type=float, default=None,
                          help="questions sent per second whatever the replies (open loop)")
    args = ap.parse_args()
    cmd = [sys.executable, "-m", "streams.cli", "bench", "beam", "--data", str(args.data)]
    if not args.table:
        cmd.append("--json")
    if args.chats is not None:
        cmd += ["--chats", str(args.chats)]
    if args.in_flight:
        cmd += ["--in-flight", str(args.in_flight)]
    if args.rate:
        cmd += ["--rate", str(args.rate)]
    with harness_env("beam", args.embedder) as env:
        return subprocess.run(cmd, env=env, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
