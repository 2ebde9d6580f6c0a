"""Worker memory per 100,000 conversations.

One worker (the services of ``make services``) ingests ``--conversations``
conversations of ``--messages`` messages each. The worker's resident memory is
read from ``/proc`` once it is ready (before any event) and again once every
event is stored and committed; the difference, scaled to 100,000
conversations, is what the worker's state costs (the sessions table holds one
state per conversation of its partitions that spoke within the closed-session
retention). Ends by printing one JSON line.

    python bench/memory.py [--conversations 100000] [--messages 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from sqlalchemy import text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ingest import produce  # noqa: E402
from streams.adapters.db.engine import create_engine  # noqa: E402
from streams.adapters.kafka.admin import ensure_topics  # noqa: E402
from streams.devtools.local_worker import LocalWorker  # noqa: E402
from streams.settings import (  # noqa: E402
    DatabaseSettings,
    KafkaSettings,
    RedisSettings,
    Settings,
    WebSettings,
)
from tests.support.services import (  # noqa: E402
    KAFKA_BROKER,
    REDIS_PORT,
    delete_topics_containing,
    free_port,
    migrated_database,
)


def events(conversations: int, messages: int) -> list[dict[str, Any]]:
    out = []
    for c in range(conversations):
        for k in range(messages):
            out.append({
                "event_id": f"mem-{c}-{k}", "type": "message", "tenant_id": "bench",
                "user_id": f"user-{c % 9973}", "agent_id": "agent-1",
                "conversation_id": f"conv-{c:08d}", "role": "user" if k % 2 == 0 else "assistant",
                "content": "a short message about the trip", "created_at": "2026-01-01T08:00:00Z",
            })
    return out


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


async def wait_stored(settings: Settings, n: int, worker: LocalWorker, timeout: float) -> None:
    engine = create_engine(settings.database)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if worker.exited:
                raise RuntimeError("the worker exited")
            async with engine.connect() as conn:
                count = (await conn.execute(
                    text("SELECT COUNT(*) FROM conversation_message"))).scalar()
            if count == n:
                return
            await asyncio.sleep(1.0)
        raise TimeoutError(f"fewer than {n} events stored in {timeout}s")
    finally:
        await engine.dispose()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    run = uuid.uuid4().hex[:10]
    topic = f"bench.mem.{run}"
    settings = Settings(
        kafka=KafkaSettings(broker=KAFKA_BROKER, app_id=f"benchmem-{run}", partitions=8,
                            chat_topic=topic, subagent_topic=f"bench.sub.{run}",
                            dlq_topic=f"bench.dlq.{run}",
                            session_closed_topic=f"bench.closed.{run}",
                            retry_topic=f"bench.retry.{run}", queries_topic=f"bench.q.{run}",
                            agent_config_topic=f"bench.cfg.{run}",
                            erasures_topic=f"bench.erase.{run}",
                            idle_topic=f"bench.idle.{run}",
                            data_dir=str(ROOT / ".bench" / f"state-{run}")),
        database=DatabaseSettings(url=SecretStr(await migrated_database("bench_memory"))),
        redis=RedisSettings(url=SecretStr(f"redis://127.0.0.1:{REDIS_PORT}/4"),
                            key_prefix=f"benchmem{run}"),
        web=WebSettings(port=free_port()),
    )
    log_path = ROOT / ".bench" / "memory-worker.log"
    evs = events(args.conversations, args.messages)
    try:
        await ensure_topics(settings.kafka)
        worker = LocalWorker(settings, log_path, cwd=ROOT, append_log=False,
                             own_session=False).start()
        assert worker.proc is not None
        try:
            await asyncio.sleep(args.settle)  # started, assigned, idle
            before = rss_bytes(worker.proc.pid)
            print(f"producing {len(evs)} events ...", file=sys.stderr)
            await produce(topic, evs)
            await wait_stored(settings, len(evs), worker, args.timeout)
            await asyncio.sleep(args.settle)  # states flushed, commits made
            after = rss_bytes(worker.proc.pid)
        finally:
            worker.stop(60)
    finally:
        await delete_topics_containing(run)
    per_100k = (after - before) * 100_000 / args.conversations
    return {
        "conversations": args.conversations,
        "messages_per_conversation": args.messages,
        "rss_ready_mb": round(before / 1e6, 1),
        "rss_after_mb": round(after / 1e6, 1),
        "mb_per_100k_conversations": round(per_100k / 1e6, 1),
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, Python {platform.python_version()}",
    }


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conversations", type=int, default=100_000)
    ap.add_argument("--messages", type=int, default=2)
    ap.add_argument("--settle", type=float, default=15.0)
    ap.add_argument("--timeout", type=float, default=600)
    print(json.dumps(asyncio.run(main(ap.parse_args()))))
