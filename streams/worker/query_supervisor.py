"""A worker's query process (``query.process`` ``own``), started and kept running.

:class:`QuerySupervisor` starts ``python -m streams.worker.query_process`` with the
worker's environment (so the same settings) and its output, and starts it again when
it exits, after a back-off that doubles from ``RESTART_INITIAL_S`` to
``RESTART_MAX_S`` (reset once a process has run ``STEADY_S``) — unless it exited
with 0: it was asked to stop (a signal to the process group), and the worker is
stopping too. :meth:`stop` asks it
to stop (SIGTERM: it drains its in-flight requests and commits) and kills it after
``grace_s``. A worker killed outright takes it along (``die_with_parent``).
:meth:`wait_ready` waits for the first process to have its query partitions (it
says so on a pipe of its own), as a worker's start waits for its own consumer's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time

from streams.metrics import QUERY_PROCESS_RESTARTS

log = logging.getLogger(__name__)
RESTART_INITIAL_S = 1.0
RESTART_MAX_S = 30.0
STEADY_S = 60.0
MODULE = "streams.worker.query_process"


class QuerySupervisor:
    def __init__(self, grace_s: float, *, command: list[str] | None = None) -> None:
        self.grace_s = grace_s
        self.command = command or [sys.executable, "-m", MODULE]
        self._process: asyncio.subprocess.Process | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._ready = asyncio.Event()
        self._down_since: float | None = None  # not answering since then
        self._started = False

    def down_for(self, now: float) -> float | None:
        """How long no query process has been answering at ``now`` (monotonic): not
        running, or without its partitions yet (0 before :meth:`start`); None while one
        is."""
        if not self._started:
            return 0.0
        return None if self._down_since is None else max(0.0, now - self._down_since)

    @property
    def pid(self) -> int | None:
        p = self._process
        return p.pid if p is not None and p.returncode is None else None

    def start(self) -> None:
        """Start keeping a query process (again after :meth:`stop`); nothing while it
        is kept already."""
        if self._task is not None and not self._task.done():
            return
        self._ready.clear()
        self._started, self._stopping = True, False
        self._down_since = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._keep())

    async def _keep(self) -> None:
        backoff = RESTART_INITIAL_S
        while not self._stopping:
            begun = time.monotonic()
            try:
                code = await self._run_one()
            except OSError as exc:  # no process (memory, descriptors): try again later
                code = None
                log.warning("the query process could not be started: %s", exc)
            if self._stopping:
                return
            if code == 0:  # it was asked to stop (SIGTERM, Ctrl-C of the process group)
                log.warning("query process stopped; not started again")
                return
            if time.monotonic() - begun >= STEADY_S:
                backoff = RESTART_INITIAL_S
            log.warning("query process exited with %s; starting it again in %.0fs",
                        code, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RESTART_MAX_S)
            QUERY_PROCESS_RESTARTS.inc()

    async def _run_one(self) -> int:
        """Start one query process and wait for it to exit (its exit code); cancelled,
        it is killed."""
        loop = asyncio.get_running_loop()
        r, w = os.pipe()
        try:
            os.set_blocking(r, False)
            process = await asyncio.create_subprocess_exec(
                *self.command, "--ready-fd", str(w), "--parent", str(os.getpid()),
                pass_fds=(w,))
        except BaseException:
            os.close(r)
            raise
        finally:
            os.close(w)
        self._process = process
        loop.add_reader(r, self._told_ready, r)
        log.info("query process %d started", process.pid)
        try:
            return await process.wait()
        except asyncio.CancelledError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            raise
        finally:
            if self._down_since is None:
                self._down_since = time.monotonic()
            loop.remove_reader(r)
            os.close(r)

    def _told_ready(self, fd: int) -> None:
        with contextlib.suppress(BlockingIOError):
            if os.read(fd, 1):  # b"": it exited without saying so
                self._ready.set()
                self._down_since = None
        asyncio.get_running_loop().remove_reader(fd)

    async def wait_ready(self, timeout_s: float) -> bool:
        """Whether a query process had its partitions within ``timeout_s``."""
        try:
            await asyncio.wait_for(self._ready.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def stop(self) -> None:
        """SIGTERM to the process (``grace_s`` to drain, then SIGKILL); none is started
        after this."""
        self._stopping = True
        p = self._process
        if p is not None and p.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                p.terminate()
            try:
                await asyncio.wait_for(asyncio.shield(p.wait()), self.grace_s)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
        if self._task is not None:  # one starting now is killed as its start is cancelled
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
