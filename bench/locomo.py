"""`make bench-locomo`: the LoCoMo harness on the local services, on a fresh database
and fresh topics, with the local embedder and the rule judge (no model).

    python bench/locomo.py [--data FILE] [--embedder local|none] [--samples N] [--table]

Prints the harness's progress on stderr and one JSON line (or, with
``--table``, the table) on stdout.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.harness_env import harness_env  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "bench" / "locomo-dev.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--embedder", choices=["local", "none"], default="local")
    ap.add_argument("--samples", type=int, default=None)
    ap.add_argument("--table", action="store_true", help="print the table instead of JSON")
    args = ap.parse_args()
    cmd = [sys.executable, "-m", "streams.cli", "bench", "locomo", "--data", str(args.data)]
    if not args.table:
        cmd.append("--json")
    if args.samples:
        cmd += ["--samples", str(args.samples)]
    with harness_env("locomo", args.embedder) as env:
        return subprocess.run(cmd, env=env, cwd=ROOT).returncode


if __name__ == "__main__":
    sys.exit(main())
