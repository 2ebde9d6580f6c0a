"""The query process's supervisor, with stand-in processes (a few lines of Python)
that say they are ready, exit, or never start."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from streams.metrics import QUERY_PROCESS_RESTARTS
from streams.worker import query_supervisor
from streams.worker.query_supervisor import QuerySupervisor

# the stand-in: says it is ready (or not), then sleeps or exits with a code
STAND_IN = """
import os, sys, time
args = sys.argv[1:]
fd = int(args[args.index("--ready-fd") + 1])
assert int(args[args.index("--parent") + 1]) == os.getppid()
with open(sys.argv[1], "a") as f:
    f.write(f"{os.getpid()}\\n")
if "{ready}" == "yes":
    os.write(fd, b"1")
code = {code}
if code is None:
    time.sleep(60)
sys.exit(code)
"""


def stand_in(log: Path, *, ready: bool, code: int | None) -> list[str]:
    script = STAND_IN.replace("{ready}", "yes" if ready else "no").replace(
        "{code}", repr(code))
    return [sys.executable, "-c", script, str(log)]


def started(log: Path) -> list[int]:
    return [int(x) for x in log.read_text().split()] if log.exists() else []


async def until(check: object, timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not check():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


@pytest.fixture(autouse=True)
def quick_restarts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(query_supervisor, "RESTART_INITIAL_S", 0.05)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_a_ready_process_is_waited_for_and_stopped(tmp_path: Path) -> None:
    log = tmp_path / "pids"
    sup = QuerySupervisor(5.0, command=stand_in(log, ready=True, code=None))
    before = open_fds()
    sup.start()
    assert await sup.wait_ready(10.0)
    pid = sup.pid
    assert pid is not None and started(log) == [pid]
    await sup.stop()
    assert sup.pid is None and started(log) == [pid]  # none started after the stop
    assert open_fds() <= before


async def test_one_that_never_says_ready_is_not_waited_for_past_the_timeout(
        tmp_path: Path) -> None:
    sup = QuerySupervisor(5.0, command=stand_in(tmp_path / "pids", ready=False, code=None))
    sup.start()
    assert not await sup.wait_ready(0.5)
    await sup.stop()


async def test_one_that_fails_is_started_again_and_counted(tmp_path: Path) -> None:
    log = tmp_path / "pids"
    restarts = QUERY_PROCESS_RESTARTS._value.get()
    sup = QuerySupervisor(5.0, command=stand_in(log, ready=False, code=3))
    sup.start()
    await until(lambda: len(started(log)) >= 3)
    await sup.stop()
    assert QUERY_PROCESS_RESTARTS._value.get() - restarts >= 2
    assert not await sup.wait_ready(0.1)


async def test_one_that_exits_cleanly_was_asked_to_and_is_not_started_again(
        tmp_path: Path) -> None:
    log = tmp_path / "pids"
    sup = QuerySupervisor(5.0, command=stand_in(log, ready=True, code=0))
    sup.start()
    await until(lambda: sup._task is not None and sup._task.done())
    assert len(started(log)) == 1
    await sup.stop()


async def test_a_process_that_cannot_be_started_is_tried_again_without_leaking(
        tmp_path: Path) -> None:
    sup = QuerySupervisor(5.0, command=[str(tmp_path / "no-such-program")])
    before = open_fds()
    sup.start()
    await asyncio.sleep(0.5)  # several attempts at 0.05, 0.1, 0.2 s
    assert sup._task is not None and not sup._task.done()
    await sup.stop()
    assert open_fds() <= before


@pytest.mark.parametrize(("query", "ok"), [
    ({"process": "own", "process_port": 6066}, False),  # the worker's own port
    ({"process": "own", "process_port": 6067}, True),
    ({"process": "own"}, True),
    ({"process": "worker", "process_port": 6066}, True),  # not used: no query process
])
def test_the_query_process_port_is_not_the_worker_s(query: dict[str, object], ok: bool) -> None:
    from pydantic import ValidationError

    from streams.settings import Settings
    if ok:
        assert Settings(query=query, web={"port": 6066}).query.process == query["process"]
    else:
        with pytest.raises(ValidationError, match="must differ from web port"):
            Settings(query=query, web={"port": 6066})


async def test_the_time_without_an_answering_process_is_told(tmp_path: Path) -> None:
    log = tmp_path / "pids"
    sup = QuerySupervisor(5.0, command=stand_in(log, ready=True, code=None))
    loop = asyncio.get_running_loop()
    assert sup.down_for(loop.time()) == 0.0  # not started: not ready, not yet late
    sup.start()
    assert await sup.wait_ready(10.0)
    assert sup.down_for(asyncio.get_running_loop().time()) is None
    pid = sup.pid
    assert pid is not None
    os.kill(pid, 9)
    await until(lambda: sup.down_for(loop.time()) is not None)
    await until(lambda: len(started(log)) == 2 and sup.down_for(loop.time()) is None)
    await sup.stop()


async def test_started_twice_it_keeps_one_and_after_a_stop_waits_for_the_new_one(
        tmp_path: Path) -> None:
    log = tmp_path / "pids"
    sup = QuerySupervisor(5.0, command=stand_in(log, ready=True, code=None))
    sup.start()
    sup.start()
    assert await sup.wait_ready(10.0)
    await asyncio.sleep(0.5)
    assert len(started(log)) == 1
    await sup.stop()
    sup.command = stand_in(log, ready=False, code=None)
    sup.start()  # its process never says it is ready
    assert not await sup.wait_ready(0.5)
    await sup.stop()
    assert len(started(log)) == 2
