"""Run ``memstream worker`` as a child process: the one way the demo, the
benchmarks and the tests start a worker.

With ``settings`` the child sees the current environment without its
``MEMSTREAM_*`` settings (the variables that are no setting, such as
``MEMSTREAM_MIGRATIONS_DIR``, are kept), then the settings
(:func:`settings_env`); without, the current environment. Either way
``MEMSTREAM_LOG_LEVEL`` is set to ``log_level`` (``warn``) unless that is
None, and ``env`` is applied last. Output and errors go to ``log_path``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from streams.cli.env_check import NOT_SETTINGS
from streams.devtools.processes import stop_process
from streams.settings import Settings, settings_env

MEMSTREAM = [sys.executable, "-m", "streams.cli"]


def worker_env(settings: Settings | None, *, log_level: str | None = "warn",
               env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment, as the module docstring describes."""
    if settings is None:
        out = dict(os.environ)
    else:
        out = {k: v for k, v in os.environ.items()
               if not k.startswith("MEMSTREAM_") or k in NOT_SETTINGS}
        out.update(settings_env(settings))
    if log_level is not None:
        out["MEMSTREAM_LOG_LEVEL"] = log_level
    out.update(env or {})
    return out


def log_tail(path: Path, chars: int = 3000) -> str:
    """The end of a worker's log; empty when there is none yet."""
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


class LocalWorker:
    """``args`` follow ``memstream worker``; ``wrapper`` runs before it (a
    profiler: ``["py-spy", "record", ..., "--"]``, then :attr:`proc` is the
    wrapper). ``append_log=False`` starts the log afresh; ``own_session=False``
    keeps the child in the caller's process group (a terminal's Ctrl-C reaches
    it too)."""

    def __init__(self, settings: Settings | None, log_path: Path, *,
                 log_level: str | None = "warn", cwd: Path | None = None,
                 env: Mapping[str, str] | None = None, args: Sequence[str] = (),
                 wrapper: Sequence[str] = (), append_log: bool = True,
                 own_session: bool = True) -> None:
        self.settings = settings
        self.log_path = log_path
        self.log_level = log_level
        self.cwd = cwd
        self.env = dict(env or {})
        self.args = list(args)
        self.wrapper = list(wrapper)
        self.append_log = append_log
        self.own_session = own_session
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def argv(self) -> list[str]:
        return [*self.wrapper, *MEMSTREAM, "worker", *self.args]

    def start(self) -> LocalWorker:
        env = worker_env(self.settings, log_level=self.log_level, env=self.env)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab" if self.append_log else "wb") as log:
            self.proc = subprocess.Popen(
                self.argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=self.own_session, cwd=self.cwd,
            )
        return self

    @property
    def exited(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def log_tail(self, chars: int = 3000) -> str:
        return log_tail(self.log_path, chars)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` seconds."""
        stop_process(self.proc, timeout)
