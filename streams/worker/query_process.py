"""The query process: ``memory.queries`` answered in a process of its own, beside a
worker (``query.process`` ``own``), composed here without Faust.

A worker's stages share one event loop, and in one process one interpreter lock:
while one tenant's long session is read, screened and consolidated, every other
tenant's queries wait for turns of that loop. In a process of its own the query
consumer gets a core's turns from the operating system, as a short task does.

The process holds what the query path needs and nothing else: its own runtime
(database engine, Redis, the built-in provider and the scopes it holds), the
agent configurations followed from their topic
(:class:`~streams.adapters.kafka.agent_config_follower.AgentConfigFollower`), a
producer of its own for replies and dead letters, its own quotas of queries, the
erasure log read every ``erasure.sync_interval_s`` (a finished erasure drops what it
names from the caches, as in the worker), and the watch of its event loop that tells
the quotas when it is loaded. It answers, rescues and commits as the worker's
query consumer does, in the same consumer group.

It ends with its worker: started by :class:`~streams.worker.query_supervisor.
QuerySupervisor`, it asks the kernel for SIGKILL when its parent dies (Linux), so
a worker killed outright leaves no query process behind; SIGTERM stops it as a
worker's shutdown stops its query consumer (in-flight requests drained, answers
committed).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from streams.adapters.db.dead_letter_ledger import DeadLetterLedger
from streams.adapters.kafka.agent_config_follower import AgentConfigFollower
from streams.adapters.kafka.clients import partitions, producer
from streams.adapters.kafka.dead_letters import DeadLetterFinder, ExactlyOnceDeadLetters
from streams.adapters.kafka.publish import ProducerPublisher
from streams.adapters.kafka.query_consumer import QueryConsumer
from streams.adapters.kafka.query_standby import QueryStandby
from streams.backoff import retry_forever
from streams.memory.agent_configs import TableAgentConfigs
from streams.metrics import EVENT_LOOP_LAG
from streams.query.rescue import Rescuer
from streams.quotas.load_share import LoadShare
from streams.settings import Settings
from streams.stats.search_log import SearchLog, SearchLogWriter
from streams.wire.envelope import SourceRecord
from streams.worker.gc_tuning import time_collections, tune_gc
from streams.worker.loop_lag import LoopLagWatch
from streams.worker.quotas import process_quotas
from streams.worker.runtime import Runtime
from streams.worker.wiring import Wiring, query_consumer_config

log = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1


def rescuer(settings: Settings, queries: QueryConsumer,
            handle: Callable[[SourceRecord], Awaitable[bool]]) -> Rescuer:
    """The rescuer of the requests whose owner does not begin them in time, beside
    ``queries`` (a worker's query consumer, or the query process's)."""
    q = settings.query
    return Rescuer(handle, lambda: set(queries.partitions()), after_s=q.rescue_after_s,
                   share=q.rescue_share, concurrency=q.rescue_concurrency,
                   max_pending=q.rescue_pending_max, stopped=queries.rebalancing)


def die_with_parent(parent: int | None) -> None:
    """SIGKILL when the parent process dies (Linux; elsewhere nothing); exit at once
    when the parent (its pid ``parent``) died before this was asked for."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def _send(p: Any) -> Callable[..., Awaitable[Any]]:
    """``p.send`` with the arguments of Faust's producer (``ProducerPublisher``'s)."""
    async def send(topic: str, key: bytes | None, value: bytes | None, partition: int | None,
                   timestamp: float | None, headers: Any) -> Any:
        return await p.send(topic, value, key=key, partition=partition,
                            headers=list(headers) if headers else None)
    return send


async def _every(interval_s: float, tick: Callable[[], Awaitable[None]], what: str) -> None:
    while True:
        await asyncio.sleep(interval_s)
        try:
            await tick()
        except Exception as exc:  # the next tick tries again
            log.warning("%s failed: %s: %s", what, type(exc).__name__, exc)


async def _watch_loop(load: LoadShare) -> None:
    watch = LoopLagWatch()
    while True:
        await asyncio.sleep(watch.interval_s)
        now = time.monotonic()
        lag, line = watch.tick(now)
        EVENT_LOOP_LAG.observe(lag)
        load.note_lag(lag, now)
        if line is not None:
            log.warning("%s", line)


async def _tell_ready(queries: QueryConsumer, fd: int | None, wait_s: float) -> None:
    """Write to ``fd`` once ``queries`` has its first partitions, and close it."""
    if fd is None:
        return
    try:
        while not await queries.wait_assigned(wait_s):
            log.warning("the query consumer has no partitions after %.0fs; it keeps trying",
                        wait_s)
        os.write(fd, b"1")
    finally:
        os.close(fd)


async def serve(settings: Settings, stop: asyncio.Event, ready_fd: int | None = None) -> None:
    """Answer queries until ``stop`` is set, then close everything in order; ``ready_fd``
    is written to once the query consumer has its partitions."""
    s = settings
    i = s.ingest
    runtime = Runtime(s, migrate=False)
    await runtime.start()
    await retry_forever(runtime.erasures.refresh, what="erasure-log",
                        initial_s=i.retry_initial_s, max_s=i.retry_max_s)
    configs = AgentConfigFollower(s.kafka)
    await retry_forever(configs.start, what="agent-config",
                        initial_s=i.retry_initial_s, max_s=i.retry_max_s)
    out = producer(s.kafka)
    await out.start()
    publisher = ExactlyOnceDeadLetters(
        ProducerPublisher(_send(out)), dlq_topic=s.kafka.dlq_topic,
        ledger=lambda: DeadLetterLedger(runtime.engine), finder=DeadLetterFinder(s.kafka))
    quotas = process_quotas(s)
    wiring = Wiring(s, runtime, publisher=publisher, agent_configs=TableAgentConfigs(configs),
                    erasures=runtime.erasures, quotas=quotas)
    queries = QueryConsumer(query_consumer_config(s))
    standby = QueryStandby(query_consumer_config(s),
                           lambda: partitions(s.kafka, s.kafka.queries_topic))
    replies = wiring.replies()
    await replies.start()
    search_log = SearchLogWriter(SearchLog(runtime.engine))
    await search_log.start()
    lookup = wiring.reply_lookup()
    answering = wiring.query_answering(search_log, maybe_seen=queries.maybe_seen,
                                       replies=replies, sent_replies=lookup)
    loop = asyncio.get_running_loop()
    chores = [loop.create_task(_watch_loop(quotas.load)),
              loop.create_task(_every(s.erasure.sync_interval_s, runtime.erasures.refresh,
                                      "reading the erasure log"))]
    queries.start(answering, shed=answering.shed)
    chores.append(loop.create_task(
        _tell_ready(queries, ready_fd, 3 * s.query.session_timeout_s)))
    if s.query.rescue and runtime.redis is not None:
        rescue = rescuer(s, queries, answering.rescue)
        chores.append(loop.create_task(rescue.run()))
        standby.start(rescue.offer)
    log.info("query process %d answering %s", os.getpid(), s.kafka.queries_topic)
    try:
        await stop.wait()
    finally:
        await standby.stop()
        for task in chores:
            task.cancel()
        await asyncio.gather(*chores, return_exceptions=True)
        await queries.stop()
        await replies.stop()
        await lookup.close()
        await search_log.stop()
        await configs.stop()
        await out.stop()
        await runtime.stop()


def main() -> None:
    """The query process's entry point (``python -m streams.worker.query_process``)."""
    args = sys.argv[1:]

    def option(name: str) -> int | None:
        return int(args[args.index(name) + 1]) if name in args else None

    die_with_parent(option("--parent"))
    ready_fd = option("--ready-fd")
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="[%(asctime)s] [%(process)s] [%(levelname)s] %(message)s")
    settings = Settings()
    tune_gc()  # as the worker does: full collections, which stop every query, kept rare
    time_collections()
    port = settings.query.process_port
    if port is not None:
        from prometheus_client import start_http_server
        start_http_server(port, addr=settings.web.host)

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(settings, stop, ready_fd)

    asyncio.run(run())


if __name__ == "__main__":
    main()
