"""A MariaDB that requires TLS and a Redis that speaks only TLS, both with
passwords, of the test's own (started and stopped by their pids), with the
certificates of :func:`tests.support.secure_kafka.make_certs`."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from tests.support.secure_kafka import Certs
from tests.support.services import free_port, port_open

DB_USER, DB_PASSWORD, DB_NAME = "memstream", "db-pw-9", "memstream"
REDIS_PASSWORD = "redis-pw-7"


def _stop(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _wait(check: object, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.3)
    raise TimeoutError(f"{what} did not start")


class TlsMariaDB:
    def __init__(self, workdir: Path, certs: Certs) -> None:
        self.workdir, self.certs = workdir, certs
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> TlsMariaDB:
        data, sock = self.workdir / "data", self.workdir / "mysqld.sock"
        self.workdir.mkdir(parents=True, exist_ok=True)
        user = os.environ.get("USER") or "root"
        key = self.workdir / "server.key"
        text = self.certs.server.read_text()
        key.write_text(text[:text.index("-----END PRIVATE KEY-----") + 26])
        cert = self.workdir / "server.crt"
        cert.write_text(text[text.index("-----BEGIN CERTIFICATE-----"):])
        subprocess.run(["mariadb-install-db", f"--datadir={data}", f"--user={user}",
                        "--auth-root-authentication-method=normal", "--skip-test-db",
                        "--no-defaults"], check=True, stdout=subprocess.DEVNULL)
        self.proc = subprocess.Popen(
            ["mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={sock}",
             f"--port={self.port}", "--bind-address=127.0.0.1", f"--user={user}",
             f"--log-error={self.workdir / 'error.log'}", "--skip-name-resolve",
             "--innodb-buffer-pool-size=32M", f"--ssl-ca={self.certs.ca}",
             f"--ssl-cert={cert}", f"--ssl-key={key}", "--require-secure-transport=ON",
             "--character-set-server=utf8mb4", "--collation-server=utf8mb4_unicode_ci"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def ready() -> bool:
            return port_open(self.port) and subprocess.run(
                ["mariadb", f"--socket={sock}", "-uroot", "-e", "SELECT 1"],
                capture_output=True).returncode == 0

        _wait(ready, "the TLS MariaDB")
        sql = (f"CREATE DATABASE {DB_NAME} CHARACTER SET utf8mb4; "
               f"CREATE USER '{DB_USER}'@'%' IDENTIFIED BY '{DB_PASSWORD}' REQUIRE SSL; "
               f"GRANT ALL ON {DB_NAME}.* TO '{DB_USER}'@'%';")
        subprocess.run(["mariadb", f"--socket={sock}", "-uroot", "-e", sql], check=True)
        return self

    def url(self, *, tls: bool = True, password: str = DB_PASSWORD) -> str:
        base = f"mysql+aiomysql://{DB_USER}:{password}@127.0.0.1:{self.port}/{DB_NAME}"
        return f"{base}?charset=utf8mb4" + (f"&ssl_ca={self.certs.ca}" if tls else "")

    def stop(self) -> None:
        _stop(self.proc)
        self.proc = None
        shutil.rmtree(self.workdir / "data", ignore_errors=True)


class TlsRedis:
    def __init__(self, workdir: Path, certs: Certs) -> None:
        self.workdir, self.certs = workdir, certs
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> TlsRedis:
        self.workdir.mkdir(parents=True, exist_ok=True)
        text = self.certs.server.read_text()
        key, cert = self.workdir / "server.key", self.workdir / "server.crt"
        key.write_text(text[:text.index("-----END PRIVATE KEY-----") + 26])
        cert.write_text(text[text.index("-----BEGIN CERTIFICATE-----"):])
        self.proc = subprocess.Popen(
            ["redis-server", "--port", "0", "--tls-port", str(self.port),
             "--bind", "127.0.0.1", "--tls-cert-file", str(cert), "--tls-key-file", str(key),
             "--tls-ca-cert-file", str(self.certs.ca), "--tls-auth-clients", "no",
             "--requirepass", REDIS_PASSWORD, "--save", "", "--appendonly", "no",
             "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait(lambda: port_open(self.port), "the TLS Redis", 20)
        return self

    def url(self, password: str = REDIS_PASSWORD) -> str:
        return f"rediss://:{password}@127.0.0.1:{self.port}/0?ssl_ca_certs={self.certs.ca}"

    def stop(self) -> None:
        _stop(self.proc)
        self.proc = None
