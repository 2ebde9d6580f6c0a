"""The query process (``query.process`` ``own``) lives and dies with its worker: it
answers beside it, is started again when it exits, and a worker killed outright
leaves none behind."""

from __future__ import annotations

import asyncio
import os
import re
import signal

import httpx
import pytest

from streams.client import MemoryClient
from streams.devtools.embedded_broker import free_port
from tests.integration.conftest import Stack
from tests.support.services import KAFKA_BOOTSTRAP
from tests.support.worker import WorkerProcess, eventually

pytestmark = pytest.mark.asyncio


def query_pids(worker: WorkerProcess) -> list[int]:
    return [int(p) for p in re.findall(r"query process (\d+) started", worker.log_text())]


def assigned(worker: WorkerProcess, times: int = 1) -> bool:
    """The query process (the ``times``-th) has its partitions."""
    return worker.log_text().count("query partitions assigned") >= times


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie is not running
        return f.read().split(") ", 1)[1][0] != "Z"


async def answered(stack: Stack) -> None:
    async with MemoryClient(KAFKA_BOOTSTRAP, request_topic=stack.topics["queries"],
                            reply_topic=f"{stack.name}.replies", timeout_s=20) as client:
        reply = await client.query(message="anything", tenant_id="t", user_id="u",
                                   agent_id="a")
    assert reply.error is None


async def test_a_query_process_that_exits_is_started_again_and_answers(stack: Stack) -> None:
    port = free_port()
    worker = stack.worker(MEMSTREAM_QUERY__PROCESS="own",
                          MEMSTREAM_QUERY__PROCESS_PORT=str(port)).start()
    try:
        await eventually(lambda: assigned(worker), 30, "the query process's partitions")
        await answered(stack)
        async def metrics() -> str:
            async with httpx.AsyncClient() as http:
                return (await http.get(f"http://127.0.0.1:{port}/metrics")).text

        page = await metrics()  # its metrics: the query it answered, the stage's lag
        assert "memstream_query_seconds_count 1.0" in page, page[:2000]

        async def lag_sampled() -> bool:
            return 'memstream_stage_lag{stage="query"}' in await metrics()
        await eventually(lag_sampled, 30, "the query stage's lag")
        first = query_pids(worker)[0]
        os.kill(first, signal.SIGKILL)
        await eventually(lambda: len(query_pids(worker)) == 2 and assigned(worker, 2), 60,
                         "a new query process with the partitions")
        await answered(stack)
        assert "query process exited with -9" in worker.log_text()
    finally:
        worker.stop()
    assert not any(running(p) for p in query_pids(worker))


async def test_a_worker_killed_outright_leaves_no_query_process(stack: Stack) -> None:
    worker = stack.worker(MEMSTREAM_QUERY__PROCESS="own").start()
    try:
        await eventually(lambda: query_pids(worker), 30, "the query process")
        pid = query_pids(worker)[0]
        assert worker.proc is not None
        os.kill(worker.proc.pid, signal.SIGKILL)  # the worker alone, not its group
        await eventually(lambda: not running(pid), 10, "the query process to end")
    finally:
        worker.kill()


@pytest.mark.parametrize("process", ["own", "worker"])
async def test_the_loop_answering_queries_measures_how_busy_it_is(stack: Stack,
                                                                   process: str) -> None:
    """The worker's loop and the query process's are timed loops: the busy share that
    shares the query slots between tenants under load is measured (an untimed loop
    would leave it at 0, never busy)."""
    port = free_port()
    worker = stack.worker(MEMSTREAM_QUERY__PROCESS=process,
                          MEMSTREAM_QUERY__PROCESS_PORT=str(port)).start()
    page_port = port if process == "own" else int(worker.env["MEMSTREAM_WEB__PORT"])
    try:
        if process == "own":
            await eventually(lambda: assigned(worker), 30, "the query process's partitions")

        async def busy_share() -> float:
            async with httpx.AsyncClient() as http:
                page = (await http.get(f"http://127.0.0.1:{page_port}/metrics")).text
            found = re.search(r"^memstream_event_loop_busy_share (\S+)$", page, re.M)
            assert found is not None, page[:2000]
            return float(found.group(1))

        for _ in range(3):  # measured at a dispatch a quarter second after the last
            await answered(stack)
            await asyncio.sleep(0.3)
        assert 0 < await busy_share() <= 1
    finally:
        worker.stop()
