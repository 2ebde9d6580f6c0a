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
names from the caches, as in the worker), the stale-history marks read every
``STALE_MARKS_SYNC_S``, the watch of its event loop that tells the quotas when it is
loaded, and the query stage's lag sampled as in the worker. It answers, rescues and
commits as the worker's query consumer does, in the same consumer group. A start that
fails, or is stopped, closes what it opened.

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
from streams.redaction import redact_logs
from streams.settings import Settings
from streams.stats.search_log import SearchLog, SearchLogWriter
from streams.wire.envelope import SourceRecord
from streams.worker.gc_tuning import time_collections, tune_gc
from streams.worker.kafka_monitor import LagSampler
from streams.worker.loop_busy import LoopBusy
from streams.worker.loop_busy import install as install_timed_loops
from streams.worker.loop_lag import LoopLagWatch
from streams.worker.quotas import process_quotas
from streams.worker.runtime import Runtime
from streams.worker.wiring import Wiring, query_consumer_config

log = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1
STALE_MARKS_SYNC_S = 10.0  # as the worker reads them


def rescuer(settings: Settings, queries: QueryConsumer,
            handle: Callable[[SourceRecord], Awaitable[bool]]) -> Rescuer:
    """The rescuer of the requests whose owner does not begin them in time, beside
    ``queries`` (a worker's query consumer, or the query process's)."""
    q = settings.query
    return Rescuer(handle, lambda: set(queries.partitions()), after_s=q.rescue_after_s,
                   share=q.rescue_share, concurrency=q.rescue_concurrency,
                   max_pending=q.rescue_pending_max, stopped=queries.rebalancing)


def die_with_parent(parent: int | None) -> None:
    """SIGKILL when the parent process dies (Linux; elsewhere a warning); exit at once
    when the parent (its pid ``parent``) died before this was asked for."""
    try:
        failed = ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError) as exc:
        failed, why = -1, str(exc)
    else:
        why = os.strerror(ctypes.get_errno())
    if failed:
        log.warning("the query process will outlive its worker if killed: prctl: %s", why)
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def _send(p: Any) -> Callable[..., Awaitable[Any]]:
    """``p.send`` with the arguments of Faust's producer (``ProducerPublisher``'s)."""
    async def send(topic: str, key: bytes | None, value: bytes | None, partition: int | None,
                   timestamp: float | None, headers: Any) -> Any:
        return await p.send(topic, value, key=key, partition=partition,
                            headers=list(headers) if headers else None)
    return send


async def _every(interval_s: float, tick: Callable[[], Awaitable[Any]], what: str) -> None:
    while True:
        await asyncio.sleep(interval_s)
        try:
            await tick()
        except Exception as exc:  # the next tick tries again
            log.warning("%s failed: %s: %s", what, type(exc).__name__, exc)


async def _watch_loop(load: LoadShare, busy: LoopBusy) -> None:
    watch = LoopLagWatch()
    while True:
        await asyncio.sleep(watch.interval_s)
        now = time.monotonic()
        lag, line = watch.tick(now)
        EVENT_LOOP_LAG.observe(lag)
        load.note_lag(lag, now)
        busy.measure()
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


def _closing(stack: contextlib.AsyncExitStack, close: Callable[[], Awaitable[Any]],
             what: str) -> None:
    """Close with ``close`` when ``stack`` unwinds; a failure is logged, the rest go on."""
    async def quietly() -> None:
        try:
            await close()
        except Exception as exc:
            log.warning("closing %s failed: %s: %s", what, type(exc).__name__, exc)
    stack.push_async_callback(quietly)


async def serve(settings: Settings, stop: asyncio.Event, ready_fd: int | None = None,
                started: asyncio.Event | None = None) -> None:
    """Answer queries until ``stop`` is set, then close everything in order (also when
    cancelled while starting, or a start fails); ``ready_fd`` is written to once the
    query consumer has its partitions, ``started`` set once requests are read."""
    s = settings
    i = s.ingest

    async def retried(step: Callable[[], Awaitable[Any]], what: str) -> None:
        await retry_forever(step, what=what, initial_s=i.retry_initial_s, max_s=i.retry_max_s)

    async with contextlib.AsyncExitStack() as stack:
        runtime = Runtime(s, migrate=False)
        _closing(stack, runtime.stop, "the runtime")
        await runtime.start()
        await retried(runtime.erasures.refresh, "erasure-log")
        if runtime.cache.enabled:  # the stale-history marks the worker's ingest left
            await retried(runtime.stale.sync, "stale-marks")
        configs = AgentConfigFollower(s.kafka)
        _closing(stack, configs.stop, "the agent-config consumer")
        await retried(configs.start, "agent-config")
        out = producer(s.kafka)
        _closing(stack, out.stop, "the dead-letter producer")
        await retried(out.start, "dead-letter producer")
        publisher = ExactlyOnceDeadLetters(
            ProducerPublisher(_send(out)), dlq_topic=s.kafka.dlq_topic,
            ledger=lambda: DeadLetterLedger(runtime.engine), finder=DeadLetterFinder(s.kafka))
        quotas = process_quotas(s)
        wiring = Wiring(s, runtime, publisher=publisher,
                        agent_configs=TableAgentConfigs(configs), erasures=runtime.erasures,
                        quotas=quotas)
        replies = wiring.replies()
        _closing(stack, replies.stop, "the reply producer")
        await retried(replies.start, "reply producer")
        search_log = SearchLogWriter(SearchLog(runtime.engine))
        _closing(stack, search_log.stop, "the search log")
        await search_log.start()
        lookup = wiring.reply_lookup()
        _closing(stack, lookup.close, "the reply lookup")
        # its loop answers queries alone: how busy it is shares the slots between tenants
        busy = LoopBusy(s.query.contended_busy)
        queries = QueryConsumer(query_consumer_config(s), busy=busy)
        _closing(stack, queries.stop, "the query consumer")
        answering = wiring.query_answering(search_log, maybe_seen=queries.maybe_seen,
                                           replies=replies, sent_replies=lookup)
        loop = asyncio.get_running_loop()
        chores: list[asyncio.Task[None]] = []

        async def end_chores() -> None:
            for task in chores:
                task.cancel()
            await asyncio.gather(*chores, return_exceptions=True)
        _closing(stack, end_chores, "the timers")
        chores += [loop.create_task(_watch_loop(quotas.load, busy)),
                   loop.create_task(_every(s.erasure.sync_interval_s, runtime.erasures.refresh,
                                           "reading the erasure log"))]
        if runtime.cache.enabled:
            chores.append(loop.create_task(_every(STALE_MARKS_SYNC_S, runtime.stale.sync,
                                                  "reading the stale-history marks")))
        # the query stage's lag in memstream_consumer_lag / memstream_stage_lag, as the
        # worker samples its own query consumer's
        lag = LagSampler(queries, queries.tracker,
                         end_offsets_interval_s=s.health.end_offsets_interval_s)
        _closing(stack, lag.close, "the lag sampler")

        async def sample_lag() -> None:
            lag.sample()
        chores.append(loop.create_task(_every(s.health.lag_interval_s, sample_lag,
                                              "sampling the query consumer's lag")))
        queries.start(answering, shed=answering.shed)
        chores.append(loop.create_task(
            _tell_ready(queries, ready_fd, 3 * s.query.session_timeout_s)))
        if s.query.rescue and runtime.redis is not None:
            standby = QueryStandby(query_consumer_config(s),
                                   lambda: partitions(s.kafka, s.kafka.queries_topic))
            _closing(stack, standby.stop, "the standby reader")
            rescue = rescuer(s, queries, answering.rescue)
            chores.append(loop.create_task(rescue.run()))
            standby.start(rescue.offer)
        log.info("query process %d answering %s", os.getpid(), s.kafka.queries_topic)
        if started is not None:
            started.set()
        await stop.wait()


def main() -> None:
    """The query process's entry point (``python -m streams.worker.query_process``)."""
    args = sys.argv[1:]

    def option(name: str) -> int | None:
        return int(args[args.index(name) + 1]) if name in args else None

    settings = Settings()
    level = {"crit": "CRITICAL", "warn": "WARNING"}.get(settings.log_level,
                                                       settings.log_level.upper())
    logging.basicConfig(level=level, stream=sys.stderr,
                        format="[%(asctime)s] [%(process)s] [%(levelname)s] %(message)s")
    redact_logs()  # no SQL, row contents or credentials in any log line, as in the worker
    die_with_parent(option("--parent"))
    ready_fd = option("--ready-fd")
    tune_gc()  # as the worker does: full collections, which stop every query, kept rare
    time_collections()
    install_timed_loops()  # how busy its loop is shares the query slots between tenants
    port = settings.query.process_port
    if port is not None:
        from prometheus_client import start_http_server
        start_http_server(port, addr=settings.web.host)

    async def run() -> None:
        stop, started = asyncio.Event(), asyncio.Event()
        task = asyncio.ensure_future(serve(settings, stop, ready_fd, started))

        def on_signal() -> None:  # still starting: give up the start (what it opened closes)
            if not started.is_set() and not stop.is_set():
                task.cancel()  # once: a second signal must not cut the closing short
            stop.set()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal)
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(run())


if __name__ == "__main__":
    main()
