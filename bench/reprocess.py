"""Reprocess benchmark: sessions rebuilt per second, and whether the cost per session
stays flat as the job grows.

On a fresh MariaDB database of ``make services``: N sessions are consolidated
live (rule judge, built-in provider, the sessions of ``bench/consolidation.py``:
users come back, so cubes hold many memories), then the tenant is reprocessed
with the episodes cut shorter (so every episode is written anew and the old one
retired), through the pipeline ``memstream reprocess`` runs. Reported: the plan
time, the rebuild time, the milliseconds per session in each quarter of the
job, the SQL statements per session, and what was written and retired.

Ends by printing one JSON line.

    python bench/reprocess.py [--sessions 1000] [--messages 6]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import platform
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from sqlalchemy import event

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streams.cli.reprocess import NothingToPublish  # noqa: E402
from streams.consolidation.reprocess import ReprocessRequest  # noqa: E402
from streams.memory.agent_configs import StaticAgentConfigs  # noqa: E402
from streams.settings import ConsolidationSettings, DatabaseSettings, RedisSettings, Settings  # noqa: E402
from streams.worker.runtime import Runtime  # noqa: E402
from streams.worker.wiring import Wiring  # noqa: E402
from tests.support.services import REDIS_PORT, drop_database, migrated_database  # noqa: E402

_spec = importlib.util.spec_from_file_location("bench_consolidation",
                                               ROOT / "bench" / "consolidation.py")
assert _spec and _spec.loader
live = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(live)


PAD = "That is what I told you last week, when we talked about it."


async def rebuild(settings: Settings, n: int) -> dict[str, Any]:
    runtime = await Runtime(settings, migrate=False).start()
    statements = [0]
    event.listen(runtime.engine.sync_engine, "before_cursor_execute",
                 lambda *a: statements.__setitem__(0, statements[0] + 1))
    try:
        r = Wiring(settings, runtime, publisher=NothingToPublish(),
                   agent_configs=StaticAgentConfigs()).reprocessor()
        req = ReprocessRequest("bench")
        started = time.perf_counter()
        job, _, _ = await r.start(req)
        planned = time.perf_counter() - started
        assert job is not None and job.sessions == n, job
        marks: list[tuple[int, float, int]] = []
        quarter = max(1, n // 4)
        t0 = time.perf_counter()
        statements[0] = 0

        def progress(done: int, total: int) -> None:
            if done and (done % quarter == 0 or done == total):
                marks.append((done, time.perf_counter() - t0, statements[0]))

        report = await r.run(job, progress)
        elapsed = time.perf_counter() - t0
    finally:
        await runtime.stop()
    per_quarter, last = [], (0, 0.0, 0)
    for done, t, _ in marks[:4]:
        per_quarter.append(round(1000 * (t - last[1]) / (done - last[0]), 1))
        last = (done, t, 0)
    return {"plan_s": round(planned, 2), "rebuild_s": round(elapsed, 2),
            "sessions_per_s": round(n / elapsed, 1), "ms_per_session_by_quarter": per_quarter,
            "statements_per_session": round(statements[0] / n, 1),
            "written": report.written, "kept": report.kept, "retired": report.retired}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    run = uuid.uuid4().hex[:6]
    redis = RedisSettings(url=SecretStr(f"redis://127.0.0.1:{REDIS_PORT}/1"), key_prefix=f"br{run}")
    db = f"bench_reprocess_{run}"
    try:
        url = await migrated_database(db)
        base = Settings(database=DatabaseSettings(url=SecretStr(url)), redis=redis)
        data = [(closed, [m.model_copy(update={"content": f"{m.content} {PAD}"}) for m in msgs])
                for closed, msgs in live.sessions(args.sessions, args.messages,
                                                  max(1, args.sessions // 4))]
        print(f"live: {args.sessions} sessions x {args.messages} messages ...", file=sys.stderr)
        before = await live.consolidate(base, data)
        print("reprocess with shorter episodes ...", file=sys.stderr)
        shorter = base.model_copy(update={"consolidation": ConsolidationSettings(
            episode_max_chars=50)})
        out = await rebuild(shorter, args.sessions)
    finally:
        drop_database(db)
    return {"sessions": args.sessions, "messages_per_session": args.messages,
            "live_memories": before["stored"], **out,
            "machine": f"{platform.machine()} {os.cpu_count()} cpu, "
                       f"Python {platform.python_version()}"}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--messages", type=int, default=6, help="messages per session")
    print(json.dumps(asyncio.run(main(ap.parse_args()))))
