"""Failover benchmark: queries with a 1 s deadline while workers are SIGKILLed.

Two workers answer queries (the Session part only, so what is measured is
delivery, not ranking); every ``--kill-every`` seconds one of them, in turn, is
SIGKILLed and started again ``--restart-after`` seconds later, as a kubelet
would. Meanwhile ``MemoryClient`` asks at ``--rate`` per second, each caller
waiting ``--deadline`` seconds (the request's ``timeout_ms`` too). Needs the
services of ``make services``. Prints one JSON line: requests, answered within
the deadline (count and share), p50/p99 of the answered, hedges sent and won,
duplicates the client dropped, the p99 of the queries first sent to the killed
worker's partitions and of those first sent to the survivor's, from each kill
to the query session timeout after it, the requests workers took over from
another's partitions, and the workers' CPU per query (undisturbed runs).

    python bench/failover.py [--seconds 300] [--kill-every 30] [--rate 20]
                             [--deadline 1.0] [--hedge-after 0.25 | --no-hedge]
                             [--static] [--no-rescue] [--no-kill]

``--no-rescue`` turns the workers' take-over off (``MEMSTREAM_QUERY__RESCUE``),
leaving the client's hedge alone. ``--static`` gives each worker a stable
``MEMSTREAM_QUERY__INSTANCE_ID`` (static membership, as a StatefulSet would): a
worker back within the query session timeout takes its partitions again without
a rebalance.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import shutil
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from pydantic import SecretStr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streams.adapters.kafka.admin import ensure_topics  # noqa: E402
from streams.client import ClientStats, MemoryClient, QueryOutcome, QueryTimeoutError  # noqa: E402
from streams.devtools.local_worker import LocalWorker  # noqa: E402
from streams.devtools.locomo.scoring import percentile  # noqa: E402
from streams.settings import (  # noqa: E402
    ConsolidationSettings,
    DatabaseSettings,
    KafkaSettings,
    QuerySettings,
    RedisSettings,
    Settings,
)
from tests.support.services import (  # noqa: E402
    KAFKA_BROKER,
    REDIS_PORT,
    create_database,
    delete_topics_containing,
    drop_database,
    free_port,
)

PARTITIONS = 4


def run_settings(run: str, url: str) -> Settings:
    k = KafkaSettings(broker=KAFKA_BROKER, app_id=f"fobench-{run}", partitions=PARTITIONS,
                      data_dir=str(ROOT / ".bench" / f"fobench-{run}"),
                      **{f"{n}_topic": f"fobench-{run}.{n}" for n in (
                          "chat", "subagent", "dlq", "retry", "session_closed", "queries",
                          "agent_config", "idle")})
    return Settings(
        kafka=k,
        database=DatabaseSettings(url=SecretStr(url)),
        redis=RedisSettings(url=SecretStr(f"redis://127.0.0.1:{REDIS_PORT}/7"),
                            key_prefix=f"fo{run}"),
        consolidation=ConsolidationSettings(default_long_memory=False),
        query=QuerySettings(reply_topic=f"fobench-{run}.replies"),
    )


def cpu_s(worker: LocalWorker) -> float:
    """User and system CPU seconds of the worker process so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{worker.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, AttributeError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def taken_over(worker: LocalWorker) -> float:
    """The requests the worker took over from other workers' partitions, by its metrics
    (0 when unknown)."""
    url = f"http://127.0.0.1:{worker.env['MEMSTREAM_WEB__PORT']}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            text = r.read().decode()
    except OSError:
        return 0.0
    for line in text.splitlines():
        if line.startswith('memstream_query_rescues_total{outcome="taken"}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def query_partitions(worker: LocalWorker) -> set[int]:
    """The query partitions the worker holds, by its readiness (empty when unknown)."""
    url = f"http://127.0.0.1:{worker.env['MEMSTREAM_WEB__PORT']}/health/ready"
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            body = r.read()
    except urllib.error.HTTPError as e:  # not ready (503): its body still says what it holds
        body = e.read()
    except OSError:
        return set()
    try:
        return set(json.loads(body)["query"]["partitions"])
    except (ValueError, KeyError, TypeError):
        return set()


class Workers:
    """Two workers; ``kill_one`` SIGKILLs the next in turn and starts it again later."""

    def __init__(self, settings: Settings, static: bool, rescue: bool, log_dir: Path) -> None:
        self.settings = settings
        self.static = static
        self.rescue = rescue
        self.taken_by_killed = 0.0  # requests taken over by workers since killed
        self.log_dir = log_dir
        self.workers = [self._worker(i) for i in range(2)]
        self.kills = 0
        # each kill: when, and the query partitions the killed worker held
        self.killed: list[tuple[float, set[int]]] = []

    def _worker(self, i: int) -> LocalWorker:
        env = {"MEMSTREAM_WEB__PORT": str(free_port()),
               "MEMSTREAM_QUERY__RESCUE": "true" if self.rescue else "false"}
        if self.static:
            env["MEMSTREAM_QUERY__INSTANCE_ID"] = f"{self.settings.kafka.app_id}-{i}"
        return LocalWorker(self.settings, self.log_dir / f"failover-worker-{i}.log", env=env)

    def start(self) -> None:
        for w in self.workers:
            w.start()

    async def kill_one(self, restart_after_s: float) -> None:
        i = self.kills % len(self.workers)
        self.kills += 1
        old = self.workers[i]
        assert old.proc is not None
        held = await asyncio.to_thread(query_partitions, old)
        self.taken_by_killed += await asyncio.to_thread(taken_over, old)
        self.killed.append((time.monotonic(), held))
        old.proc.kill()
        old.proc.wait()
        await asyncio.sleep(restart_after_s)
        self.workers[i] = LocalWorker(self.settings, old.log_path, env=old.env).start()

    def taken_over(self) -> int:
        return int(self.taken_by_killed + sum(taken_over(w) for w in self.workers))

    def cpu_s(self) -> float:
        return sum(cpu_s(w) for w in self.workers)

    def stop(self) -> None:
        for w in self.workers:
            w.stop()


async def ready(client: MemoryClient, limit_s: float = 120.0) -> None:
    """Until a query is answered by each of the workers' partitions (the group is formed)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            await asyncio.gather(*(client.query(
                tenant_id="t1", user_id=f"warm{p}", agent_id="a1", message="hello",
                timeout_s=5.0, include_short_term=False) for p in range(16)))
            return
        except QueryTimeoutError:
            await asyncio.sleep(1.0)
    raise TimeoutError("the workers did not answer within the warm-up")


async def load(client: MemoryClient, args: argparse.Namespace, workers: Workers,
               outcomes: list[QueryOutcome]) -> dict[str, Any]:
    rng = random.Random(7)
    tasks: set[asyncio.Task[Any]] = set()
    begin = time.monotonic()
    cpu0 = workers.cpu_s()
    next_kill = begin + args.kill_every
    killing: asyncio.Task[None] | None = None
    n = 0
    while (now := time.monotonic()) - begin < args.seconds:
        if not args.no_kill and now >= next_kill and (killing is None or killing.done()):
            killing = asyncio.get_running_loop().create_task(
                workers.kill_one(args.restart_after))
            next_kill += args.kill_every
        task = asyncio.get_running_loop().create_task(ask(client, rng, args.deadline))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        n += 1
        await asyncio.sleep(max(0.0, begin + n / args.rate - time.monotonic()))
    if tasks:
        await asyncio.gather(*tasks)
    if killing is not None:
        await killing
    cpu = workers.cpu_s() - cpu0
    return {"cpu_ms_per_query": round(1000 * cpu / max(n, 1), 2) if args.no_kill else None}


async def ask(client: MemoryClient, rng: random.Random, deadline_s: float) -> None:
    user = f"u{rng.randrange(1000)}"
    with contextlib.suppress(QueryTimeoutError):  # counted by the client's outcome
        await client.query(tenant_id="t1", user_id=user, agent_id="a1",
                           message="what did we decide?", timeout_s=deadline_s,
                           include_short_term=True, last_n=5,
                           timeout_ms=int(deadline_s * 1000))


def p99(latencies_s: list[float]) -> float | None:
    return round(percentile([x * 1000 for x in latencies_s], 99), 1) if latencies_s else None


def during_kills(outcomes: list[tuple[float, QueryOutcome]], killed: list[tuple[float, set[int]]],
                 window_s: float) -> dict[str, Any]:
    """The queries asked from each kill to ``window_s`` after it, by where their first
    copy went: a partition the killed worker held, or one the survivor held."""
    dead: list[float] = []
    survivors: list[float] = []
    for asked, o in outcomes:
        for at, held in killed:
            if at <= asked <= at + window_s and o.partition is not None:
                (dead if o.partition in held else survivors).append(
                    o.latency_s if o.answered else float("inf"))
                break
    return {"dead_partitions_queries": len(dead), "dead_partitions_p99_ms": p99(dead),
            "survivor_partitions_queries": len(survivors),
            "survivor_partitions_p99_ms": p99(survivors)}


def report(outcomes: list[QueryOutcome], client: MemoryClient) -> dict[str, Any]:
    answered = [o.latency_s * 1000 for o in outcomes if o.answered]
    s = client.stats
    return {
        "requests": len(outcomes),
        "answered_in_deadline": len(answered),
        "answered_share": round(len(answered) / max(len(outcomes), 1), 5),
        "p50_ms": round(percentile(answered, 50), 1) if answered else None,
        "p99_ms": round(percentile(answered, 99), 1) if answered else None,
        "max_ms": round(max(answered), 1) if answered else None,
        "hedges_sent": s.hedges_sent,
        "hedges_per_100": round(100 * s.hedges_sent / max(s.queries, 1), 2),
        "hedges_won": s.hedges_won,
        "duplicates_dropped": s.duplicates_dropped,
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    run = f"{int(time.time())}"
    db = f"bench_failover_{run}"
    url = create_database(db)
    settings = run_settings(run, url)
    workers = Workers(settings, args.static, not args.no_rescue, ROOT / ".bench")
    outcomes: list[QueryOutcome] = []
    asked: list[tuple[float, QueryOutcome]] = []

    def record(o: QueryOutcome) -> None:
        outcomes.append(o)
        asked.append((time.monotonic() - o.latency_s, o))

    try:
        await ensure_topics(settings.kafka)
        workers.start()
        client = MemoryClient(
            KAFKA_BROKER, request_topic=settings.kafka.queries_topic,
            reply_topic=settings.query.reply_topic, timeout_s=args.deadline,
            hedge_after_s=None if args.no_hedge else args.hedge_after,
            query_group=f"{settings.kafka.app_id}-query")
        async with client:
            await ready(client)
            client.on_outcome = record
            client.stats = ClientStats()
            extra = await load(client, args, workers, outcomes)
            extra["taken_over"] = workers.taken_over()
            result = {**report(outcomes, client),
                      **during_kills(asked, workers.killed, settings.query.session_timeout_s)}
    finally:
        workers.stop()
        drop_database(db)
        try:
            await delete_topics_containing(settings.kafka.app_id)
        finally:
            shutil.rmtree(settings.kafka.data_dir, ignore_errors=True)
    return {**result, **extra, "kills": workers.kills, "seconds": args.seconds,
            "rate": args.rate, "deadline_s": args.deadline,
            "hedge_after_s": None if args.no_hedge else args.hedge_after,
            "static": args.static, "rescue": not args.no_rescue,
            "machine": f"{platform.machine()} {os.cpu_count()} cpu, "
                       f"Python {platform.python_version()}"}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--kill-every", type=float, default=30.0)
    ap.add_argument("--restart-after", type=float, default=1.0,
                    help="seconds from a SIGKILL to the worker's new start")
    ap.add_argument("--rate", type=float, default=20.0, help="queries per second")
    ap.add_argument("--deadline", type=float, default=1.0, help="each caller's wait, seconds")
    ap.add_argument("--hedge-after", type=float, default=0.25)
    ap.add_argument("--no-hedge", action="store_true")
    ap.add_argument("--static", action="store_true", help="static membership of the query group")
    ap.add_argument("--no-rescue", action="store_true",
                    help="workers do not take over requests their owner has not begun")
    ap.add_argument("--no-kill", action="store_true", help="undisturbed: the mechanism's cost")
    print(json.dumps(asyncio.run(main(ap.parse_args()))))
