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
DEFAULT_DATA = ROOT.parent / "shared" / "bench" / "locomo-dev.json"
KAFKA = os.environ.get("MEMSTREAM_TEST_KAFKA_PORT", "19092")
REDIS = os.environ.get("MEMSTREAM_TEST_REDIS_PORT", "16379")
MYSQL = os.environ.get("MEMSTREAM_TEST_MYSQL_PORT", "13306")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--embedder", choices=["local", "none"], default="local")
    ap.add_argument("--samples", type=int, default=None)
    ap.add_argument("--table", action="store_true", help="print the table instead of JSON")
    args = ap.parse_args()
    run = f"{int(time.time())}"
    db = f"bench_locomo_{run}"
    subprocess.run(["mariadb", "-h127.0.0.1", f"-P{MYSQL}", "-umemstream", "-pmemstream", "-e",
                    f"CREATE DATABASE {db} CHARACTER SET utf8mb4"], check=True)
    env = dict(os.environ)  # other MEMSTREAM_* settings pass through
    env.update({
        "MEMSTREAM_KAFKA__BROKER": f"kafka://127.0.0.1:{KAFKA}",
        "MEMSTREAM_KAFKA__APP_ID": f"locomo-{run}",
        "MEMSTREAM_KAFKA__PARTITIONS": "4",
        "MEMSTREAM_KAFKA__DATA_DIR": str(ROOT / ".bench" / f"locomo-{run}"),
        "MEMSTREAM_DATABASE__URL": f"mysql+aiomysql://memstream:memstream@127.0.0.1:{MYSQL}/{db}",
        "MEMSTREAM_REDIS__URL": f"redis://127.0.0.1:{REDIS}/5",
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
        subprocess.run(["mariadb", "-h127.0.0.1", f"-P{MYSQL}", "-umemstream", "-pmemstream",
                        "-e", f"DROP DATABASE IF EXISTS {db}"], check=False)


if __name__ == "__main__":
    sys.exit(main())
