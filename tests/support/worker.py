"""Run ``memstream worker`` as a real subprocess, as users do."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from streams.devtools.local_worker import MEMSTREAM, LocalWorker

__all__ = ["MEMSTREAM", "ROOT", "WorkerProcess", "eventually", "wait_until"]

ROOT = Path(__file__).resolve().parents[2]


class WorkerProcess(LocalWorker):
    """A worker on the current environment plus ``env`` (the test stack's
    settings), in the repository; stopped with its whole process group."""

    def __init__(self, env: dict[str, str], log_path: Path, args: Sequence[str] = ()) -> None:
        super().__init__(None, log_path, log_level=None, cwd=ROOT, env=env, args=args)
        self._log_offset = 0

    def start(self, wait_ready: bool = True, timeout: float = 90.0) -> WorkerProcess:
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        super().start()
        if wait_ready:
            self.wait_for_log("Worker ready", timeout)
        return self

    def log_text(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def wait_for_log(self, needle: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.log_text():
                return
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"worker exited ({self.proc.returncode}):\n{self.log_text()[-4000:]}"
                )
            time.sleep(0.2)
        raise TimeoutError(f"worker log never showed {needle!r}:\n{self.log_text()[-4000:]}")

    def stop(self, timeout: float = 60.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def kill(self) -> None:
        """SIGKILL: the worker gets no chance to flush or commit anything."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def wait_until(
    check: Callable[[], bool], timeout: float, what: str, interval: float = 0.25
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")


async def eventually(check: Callable[[], object], timeout: float, what: str,
                     interval: float = 0.25) -> None:
    """Like wait_until, for async tests: ``check`` may return a bool or an awaitable of one."""
    import asyncio
    import inspect

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        await asyncio.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
