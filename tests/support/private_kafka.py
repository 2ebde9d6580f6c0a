"""A Kafka broker of the test's own (KRaft, from the cached jars), which the test
may stop and start again; the shared broker of ``make services`` is never touched."""

from __future__ import annotations

import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from streams.devtools.embedded_broker import free_port, kafka_command, kafka_ready


class _ExitedError(RuntimeError):
    pass


@dataclass
class PrivateKafka:
    workdir: Path
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"kafka://{self.bootstrap}"

    def start(self, timeout: float = 120.0) -> PrivateKafka:
        """Start (or restart, keeping the data and ports) and wait until it serves.

        A first start that dies early (a port taken since it was picked) is
        tried again on other ports.
        """
        first = not (self.workdir / "data" / "meta.properties").exists()
        for attempt in range(3):
            try:
                return self._start(timeout)
            except _ExitedError:
                if not first or attempt == 2:
                    raise
                self.port, self.controller_port = free_port(), free_port()
        raise AssertionError("unreachable")

    def _start(self, timeout: float) -> PrivateKafka:
        argv = kafka_command(self.workdir, self.port, self.controller_port)
        # readiness is read from the log: start a fresh one
        (self.workdir / "server.log").unlink(missing_ok=True)
        with open(self.workdir / "kafka.out", "ab") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not kafka_ready(self.workdir, self.port):
            if self.proc.poll() is not None:
                code, self.proc = self.proc.returncode, None
                raise _ExitedError(f"private kafka exited with {code}; see "
                                   f"{self.workdir / 'kafka.out'}")
            if time.monotonic() > deadline:
                self.kill()
                raise TimeoutError(f"private kafka not ready within {timeout:.0f}s")
            time.sleep(0.2)
        return self

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM, as an orchestrator stops a broker; SIGKILL if it hangs."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None
