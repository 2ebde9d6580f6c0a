"""Ingest benchmark: sustained events/s from Kafka into MySQL + Redis with one worker.

In the same run and on the same data it also measures:

(a) reference — per message one INSERT + COMMIT, then LPUSH, EXPIRE, LLEN and
    RPOP as separate round trips (how the system memstream replaces wrote);
(b) sink ceiling — the worker's own batched MySQL and Redis writes, fed from
    memory with no Kafka;
(c) bare consumer — an aiokafka consumer that only decodes the events;
(d) Faust no-op — a Faust worker whose agent only acknowledges, batch by batch
    (``bench/faust_noop_app.py``): the cost of Faust's consumer path alone.

Needs the services of ``make services``. Ends by printing one JSON line.

    python bench/ingest.py [--events 20000] [--conversations 400] [--reference-events 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from pydantic import SecretStr
from redis.asyncio import Redis
from sqlalchemy import text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streams.adapters.db.engine import create_engine  # noqa: E402
from streams.adapters.db.messages import MessageStore, message_row, row_to_doc  # noqa: E402
from streams.adapters.kafka.admin import ensure_topics  # noqa: E402
from streams.adapters.redis.conversation_cache import ConversationCache  # noqa: E402
from streams.devtools.local_worker import LocalWorker  # noqa: E402
from streams.devtools.traced_load import traceparent  # noqa: E402
from streams.settings import (  # noqa: E402
    DatabaseSettings,
    KafkaSettings,
    RedisSettings,
    Settings,
    WebSettings,
)
from streams.wire.decode import decode_chat_event  # noqa: E402
from streams.wire.records import ChatMessage  # noqa: E402
from tests.support.services import (  # noqa: E402
    KAFKA_BOOTSTRAP,
    KAFKA_BROKER,
    REDIS_PORT,
    delete_topics_containing,
    free_port,
    migrated_database,
)

WORDS = [
    "trip", "hotel", "flight", "museum", "dinner", "budget", "sister", "vegetarian", "walk",
    "beach", "train", "ticket", "morning", "evening", "weather", "booking", "price", "city",
    "river", "market", "coffee", "book", "concert",
]


def make_events(n: int, conversations: int, seed: int = 1) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    counters: dict[int, int] = defaultdict(int)
    out = []
    for i in range(n):
        c = rng.randrange(conversations)
        k = counters[c]
        counters[c] += 1
        out.append({
            "event_id": f"bench-{c}-{k}", "type": "message", "tenant_id": "bench",
            "user_id": f"user-{c % 97}", "agent_id": "agent-1", "conversation_id": f"conv-{c}",
            "role": "user" if k % 2 == 0 else "assistant",
            "content": " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30))),
            # 10 events a second of event time: a conversation's events stay well
            # inside the session gap (30 min), so no session closes during the run
            "created_at": (t0 + timedelta(seconds=i / 10)).isoformat().replace("+00:00", "Z"),
        })
    return out


async def reference_path(events: list[dict[str, Any]], db: str) -> float:
    """Per message: INSERT + COMMIT, then LPUSH, EXPIRE, LLEN, RPOP round trips."""
    url = await migrated_database(db)
    engine = create_engine(DatabaseSettings(url=SecretStr(url)))
    redis = Redis.from_url(f"redis://127.0.0.1:{REDIS_PORT}/2")
    now = datetime.now(UTC)
    rows = [message_row(ChatMessage.model_validate(e), now) for e in events]
    from streams.adapters.db.schema.conversation import conversation_message

    t = time.perf_counter()
    for r in rows:
        async with engine.begin() as conn:
            await conn.execute(conversation_message.insert().values(**r))
        key = f"benchref:{r['tenant_id']}:{r['conversation_id']}"
        await redis.lpush(key, json.dumps(row_to_doc(r)))
        await redis.expire(key, 86400)
        if await redis.llen(key) > 200:
            await redis.rpop(key)
    elapsed = time.perf_counter() - t
    await redis.flushdb()
    await redis.aclose()
    await engine.dispose()
    return len(rows) / elapsed


async def sink_ceiling(events: list[dict[str, Any]], db: str, batch: int) -> float:
    """The worker's batched writes (MessageStore + one Redis pipeline), no Kafka."""
    url = await migrated_database(db)
    engine = create_engine(DatabaseSettings(url=SecretStr(url)))
    redis = Redis.from_url(f"redis://127.0.0.1:{REDIS_PORT}/3")
    store = MessageStore(engine)
    cache = ConversationCache(redis, prefix="benchceil")
    now = datetime.now(UTC)
    t = time.perf_counter()
    seen: set[tuple[str, str]] = set()
    for i in range(0, len(events), batch):
        chunk = [ChatMessage.model_validate(e) for e in events[i:i + batch]]
        rows = [message_row(m, now) for m in chunk]
        new = await store.store(rows)
        by_conv: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for r in rows:
            if (r["tenant_id"], r["event_id"]) in new:
                by_conv[(r["tenant_id"], r["conversation_id"])].append(row_to_doc(r))
        fresh = set(by_conv) - seen
        seen |= set(by_conv)
        await cache.append(by_conv, fresh=fresh)
    elapsed = time.perf_counter() - t
    await redis.flushdb()
    await redis.aclose()
    await engine.dispose()
    return len(events) / elapsed


async def produce(topic: str, events: list[dict[str, Any]],
                  sampled_share: float | None = None) -> None:
    """``sampled_share``: each event carries a ``traceparent`` of its own, this share of
    them sampled (None: no trace headers)."""
    p = AIOKafkaProducer(bootstrap_servers=KAFKA_BOOTSTRAP, acks="all", linger_ms=20,
                         max_batch_size=1 << 20)
    rng = random.Random(7)
    await p.start()
    try:
        futs = [await p.send(topic, json.dumps(e).encode(), key=e["conversation_id"].encode(),
                             headers=None if sampled_share is None else [
                                 ("traceparent", traceparent(rng, sampled_share).encode())])
                for e in events]
        await asyncio.gather(*futs)
    finally:
        await p.stop()


async def bare_consumer(topic: str, n: int) -> float:
    c = AIOKafkaConsumer(bootstrap_servers=KAFKA_BOOTSTRAP, enable_auto_commit=False,
                         max_partition_fetch_bytes=4 << 20, fetch_max_bytes=16 << 20)
    await c.start()
    try:
        parts = c.partitions_for_topic(topic) or set()
        if not parts:
            await c.topics()
            parts = set(range(8))
        tps = [TopicPartition(topic, p) for p in parts]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        seen = 0
        t = time.perf_counter()
        while seen < n:
            batch = await c.getmany(timeout_ms=1000, max_records=5000)
            for msgs in batch.values():
                for m in msgs:
                    decode_chat_event(m.value, 65_536)
                    seen += 1
        return n / (time.perf_counter() - t)
    finally:
        await c.stop()


def faust_noop(topic: str, n: int, timeout: float) -> float:
    """(d) A Faust worker whose agent only acknowledges (``bench/faust_noop_app.py``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")}
    env.update(NOOP_TOPIC=topic, NOOP_N=str(n), NOOP_BROKER=KAFKA_BROKER,
               NOOP_DATADIR=str(ROOT / ".bench" / f"noop-{topic}"),
               PYTHONPATH=os.pathsep.join([str(ROOT / "bench"), str(ROOT)]))
    (ROOT / ".bench").mkdir(exist_ok=True)
    out = subprocess.run([sys.executable, "-m", "faust", "-A", "faust_noop_app", "worker",
                          "-l", "warn", "--without-web"], env=env, cwd=ROOT / ".bench",
                         capture_output=True, text=True, timeout=timeout, check=False)
    for line in out.stdout.splitlines() + out.stderr.splitlines():
        if "NOOP " in line:
            return float(line.split("NOOP ", 1)[1].split()[1])
    raise RuntimeError(f"the Faust no-op worker printed no rate:\n{out.stderr[-2000:]}")


async def worker_rate(settings: Settings, n: int, timeout: float) -> float:
    log_path = ROOT / ".bench" / "ingest-worker.log"
    profiler: list[str] = []
    if os.environ.get("BENCH_PROFILE"):
        rate = os.environ.get("BENCH_PROFILE_RATE", "200")
        profiler = ["py-spy", "record", "-r", rate, "-f", "raw", "-o",
                    str(ROOT / ".bench" / "ingest-profile.txt"), "--"]
    worker = LocalWorker(settings, log_path, cwd=ROOT, wrapper=profiler, append_log=False,
                         own_session=False).start()
    assert worker.proc is not None
    engine = create_engine(settings.database)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if worker.exited:
                raise RuntimeError(f"worker exited, see {log_path}")
            try:
                async with engine.connect() as conn:
                    count = (await conn.execute(
                        text("SELECT COUNT(*) FROM conversation_message"))).scalar()
                if count == n:
                    break
            except Exception:
                pass
            await asyncio.sleep(0.5)
        else:
            raise TimeoutError(f"worker stored fewer than {n} events in {timeout}s")
        async with engine.connect() as conn:
            first, last = (await conn.execute(text(
                "SELECT MIN(ingested_at), MAX(ingested_at) FROM conversation_message"))).one()
        if os.environ.get("BENCH_METRICS"):
            import urllib.request

            body = urllib.request.urlopen(f"http://127.0.0.1:{settings.web.port}/metrics").read()
            for line in body.decode().splitlines():
                if line.startswith(("memstream_sink_write_seconds_sum",
                                    "memstream_sink_write_seconds_count",
                                    "memstream_ingest_batch_size_sum",
                                    "memstream_ingest_batch_size_count")):
                    print(line, file=sys.stderr)
        return n / max((last - first).total_seconds(), 1e-3)
    finally:
        if profiler:
            for child in _children(worker.proc.pid):  # the worker under the profiler: py-spy
                os.kill(child, 15)                    # writes its profile once it has exited
            worker.proc.wait(60)
        else:
            worker.stop(60)
        await engine.dispose()


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


async def main(args: argparse.Namespace) -> dict[str, Any]:
    run = uuid.uuid4().hex[:10]  # in the name of every topic the run creates
    events = make_events(args.events, args.conversations)
    topic = f"bench.chat.{run}"
    settings = Settings(
        kafka=KafkaSettings(broker=KAFKA_BROKER, app_id=f"bench-{run}", partitions=8,
                            chat_topic=topic, subagent_topic=f"bench.sub.{run}",
                            dlq_topic=f"bench.dlq.{run}",
                            session_closed_topic=f"bench.closed.{run}",
                            retry_topic=f"bench.retry.{run}", queries_topic=f"bench.q.{run}",
                            agent_config_topic=f"bench.cfg.{run}",
                            erasures_topic=f"bench.erase.{run}",
                            data_dir=str(ROOT / ".bench" / f"state-{run}")),
        database=DatabaseSettings(url=SecretStr(await migrated_database("bench_ingest"))),
        redis=RedisSettings(url=SecretStr(f"redis://127.0.0.1:{REDIS_PORT}/1"),
                            key_prefix=f"bench{run}"),
        web=WebSettings(port=free_port()),
    )
    settings.ingest.batch_size = args.batch
    if args.state_flush is not None:
        settings.ingest.state_flush_interval_s = args.state_flush
    try:
        await ensure_topics(settings.kafka)
        print(f"producing {len(events)} events to {topic} ...", file=sys.stderr)
        await produce(topic, events, args.sampled_share)

        bare = noop = ceiling = reference = float("nan")
        if not args.worker_only:
            print("(c) bare consumer ...", file=sys.stderr)
            bare = await bare_consumer(topic, len(events))
            print("(d) Faust worker that only acknowledges ...", file=sys.stderr)
            noop = faust_noop(topic, len(events), args.timeout)
        print("worker ...", file=sys.stderr)
        worker = await worker_rate(settings, len(events), args.timeout)
        if not args.worker_only:
            print("(b) sink ceiling ...", file=sys.stderr)
            ceiling = await sink_ceiling(events, "bench_ceiling", args.batch)
            print("(a) reference path ...", file=sys.stderr)
            reference = await reference_path(events[: args.reference_events],
                                             "bench_reference")
            redis = Redis.from_url(f"redis://127.0.0.1:{REDIS_PORT}/1")
            await redis.flushdb()
            await redis.aclose()
    finally:
        await delete_topics_containing(run)
    return {
        "events": len(events),
        "batch": args.batch,
        "events_per_s": round(worker),
        **({} if args.worker_only else {
            "reference_per_s": round(reference),
            "sink_ceiling_per_s": round(ceiling),
            "bare_consumer_per_s": round(bare),
            "faust_noop_per_s": round(noop),
            "vs_reference": round(worker / reference, 1),
            "vs_sink_ceiling": round(worker / ceiling, 2),
            "faust_noop_vs_sink_ceiling": round(noop / ceiling, 2)}),
        "sampled_share": args.sampled_share,
        "tracing": "on" if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") else "off",
        "machine": f"{platform.machine()} {os.cpu_count()} cpu, Python {platform.python_version()}",
    }


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=30_000)
    ap.add_argument("--conversations", type=int, default=400)
    ap.add_argument("--reference-events", type=int, default=2_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--state-flush", type=float, default=None,
                    help="MEMSTREAM_INGEST__STATE_FLUSH_INTERVAL_S for the worker")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--sampled-share", type=float, default=None,
                    help="each event carries a traceparent, this share sampled (what tracing "
                         "costs: with OTEL_EXPORTER_OTLP_ENDPOINT set, the worker exports)")
    ap.add_argument("--worker-only", action="store_true",
                    help="the worker's rate alone, without (a)-(d)")
    result = asyncio.run(main(ap.parse_args()))
    print(json.dumps(result))
