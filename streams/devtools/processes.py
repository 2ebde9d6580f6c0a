"""Stopping the child processes memstream starts (a worker, an embedded broker)."""

from __future__ import annotations

import subprocess
from typing import Any


def stop_process(proc: subprocess.Popen[Any] | None, timeout: float = 30.0) -> None:
    """SIGTERM, then SIGKILL if ``proc`` has not exited within ``timeout`` seconds;
    nothing when it is not running."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
