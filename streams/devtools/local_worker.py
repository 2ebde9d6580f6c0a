"""Run ``memstream worker`` as a child process with given settings (demo, benchmarks)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from streams.devtools.processes import stop_process
from streams.settings import Settings, settings_env


class LocalWorker:
    def __init__(self, settings: Settings, log_path: Path, *, log_level: str = "warn",
                 cwd: Path | None = None) -> None:
        self.settings = settings
        self.log_path = log_path
        self.log_level = log_level
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> LocalWorker:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")}
        env.update(settings_env(self.settings))
        env["MEMSTREAM_LOG_LEVEL"] = self.log_level
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "streams.cli.main", "worker"], env=env, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, cwd=self.cwd,
            )
        return self

    @property
    def exited(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> None:
        stop_process(self.proc, timeout)
