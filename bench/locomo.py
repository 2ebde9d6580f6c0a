"""`make bench-locomo`: the LoCoMo harness on the local services, on a fresh database
and fresh topics, with the local embedder and the rule judge (no model).

    python bench/locomo.py [--data FILE] [--embedder local|none] [--samples N]

Prints the harness table on stderr and one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.services import (  # noqa: E402
    KAFKA_BROKER,
    REDIS_PORT,
    create_database,
    drop_database,
    free_port,
)

DEFAULT_DATA = ROOT.parent / "shared" / "bench" / "locomo-dev.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--embedder", choices=["local", "none"], default="local")
    ap.add_argument("--samples", type=int, default=None)
    ap.add_argument("--table", action="store_true", help="print the table instead of JSON")
    args = ap.parse_args()
    run = f"{int(time.time())}"
    db = f"bench_locomo_{run}"
    url = create_database(db)
    env = dict(os.environ)  # other MEMSTREAM_* settings pass through
    env.update({
        "MEMSTREAM_KAFKA__BROKER": KAFKA_BROKER,
        "MEMSTREAM_KAFKA__APP_ID": f"locomo-{run}",
        "MEMSTREAM_KAFKA__PARTITIONS": "4",
        "MEMSTREAM_KAFKA__DATA_DIR": str(ROOT / ".bench" / f"locomo-{run}"),
        "MEMSTREAM_DATABASE__URL": url,
        "MEMSTREAM_REDIS__URL": f"redis://127.0.0.1:{REDIS_PORT}/5",
        "MEMSTREAM_REDIS__KEY_PREFIX": f"locomo{run}",
        "MEMSTREAM_EMBEDDING__KIND": args.embedder,
        "MEMSTREAM_QUERY__REPLY_TOPIC": f"locomo-{run}.replies",
        "MEMSTREAM_WEB__PORT": str(free_port()),
    })
    for name in ("chat", "subagent", "dlq", "retry", "session_closed", "queries", "agent_config",
                 "idle"):
        env[f"MEMSTREAM_KAFKA__{name.upper()}_TOPIC"] = f"locomo-{run}.{name}"
    cmd = [sys.executable, "-m", "streams.cli", "bench", "locomo", "--data", str(args.data)]
    if not args.table:
        cmd.append("--json")
    if args.samples:
        cmd += ["--samples", str(args.samples)]
    try:
        return subprocess.run(cmd, env=env, cwd=ROOT).returncode
    finally:
        drop_database(db)


if __name__ == "__main__":
    sys.exit(main())
