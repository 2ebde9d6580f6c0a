"""A Prometheus server of the test's own (the Debian ``prometheus``), on a free
port with its own configuration and data directory, stopped by its pid."""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from streams.devtools.processes import stop_process
from tests.support.services import free_port


@dataclass
class PrivatePrometheus:
    workdir: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, config: dict[str, Any], rule_files: dict[str, str] | None = None,
              timeout: float = 60.0) -> PrivatePrometheus:
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError("the Debian `prometheus` package is not installed")
        self.workdir.mkdir(parents=True, exist_ok=True)
        for name, text in (rule_files or {}).items():
            (self.workdir / name).write_text(text)
        path = self.workdir / "prometheus.yml"
        path.write_text(yaml.safe_dump(config))
        with open(self.workdir / "prometheus.log", "ab") as log:
            self.proc = subprocess.Popen(
                [binary, f"--config.file={path}", f"--storage.tsdb.path={self.workdir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited with {self.proc.returncode}: "
                                   f"{(self.workdir / 'prometheus.log').read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"prometheus not ready within {timeout:.0f}s")
            time.sleep(0.2)

    def query(self, expr: str) -> dict[str, Any]:
        """An instant query at the current time: Prometheus' whole JSON answer."""
        r = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10)
        doc: dict[str, Any] = r.json()
        return doc

    def stop(self) -> None:
        stop_process(self.proc)
        self.proc = None
