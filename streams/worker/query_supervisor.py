"""A worker's query process (``query.process`` ``own``), started and kept running.

:class:`QuerySupervisor` starts ``python -m streams.worker.query_process`` with the
worker's environment (so the same settings) and its output, and starts it again when
it exits, after a back-off that doubles from ``RESTART_INITIAL_S`` to
``RESTART_MAX_S`` (reset once a process has run ``STEADY_S``). :meth:`stop` asks it
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
        self._readers: set[asyncio.Task[None]] = set()

    @property
    def pid(self) -> int | None:
        p = self._process
        return p.pid if p is not None and p.returncode is None else None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._keep())

    async def _keep(self) -> None:
        backoff = RESTART_INITIAL_S
        while not self._stopping:
            begun = time.monotonic()
            r, w = os.pipe()
            try:
                self._process = await asyncio.create_subprocess_exec(
                    *self.command, "--ready-fd", str(w), "--parent", str(os.getpid()),
                    pass_fds=(w,))
            finally:
                os.close(w)
            reader = asyncio.get_running_loop().create_task(self._told_ready(r))
            self._readers.add(reader)
            reader.add_done_callback(self._readers.discard)
            log.info("query process %d started", self._process.pid)
            code = await self._process.wait()
            if self._stopping:
                return
            QUERY_PROCESS_RESTARTS.inc()
            if time.monotonic() - begun >= STEADY_S:
                backoff = RESTART_INITIAL_S
            log.warning("query process exited with %s; starting it again in %.0fs",
                        code, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RESTART_MAX_S)

    async def _told_ready(self, fd: int) -> None:
        try:
            said = await asyncio.to_thread(os.read, fd, 1)  # b"": it exited first
        finally:
            os.close(fd)
        if said:
            self._ready.set()

    async def wait_ready(self, timeout_s: float) -> bool:
        """Whether a query process had its partitions within ``timeout_s``."""
        try:
            await asyncio.wait_for(self._ready.wait(), timeout_s)
        except TimeoutError:
            return False
        return True

    async def stop(self) -> None:
        self._stopping = True
        p = self._process
        if p is not None and p.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                p.terminate()
            try:
                await asyncio.wait_for(p.wait(), self.grace_s)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
                await p.wait()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
