"""A MariaDB that requires TLS and a Redis that speaks only TLS, both with
passwords, of the test's own (started and stopped by their pids), with the
certificates of :func:`tests.support.secure_kafka.make_certs`."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

from tests.support.secure_kafka import Certs
from tests.support.services import free_port, port_open, wait_up

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


def server_key_and_cert(workdir: Path, certs: Certs) -> tuple[Path, Path]:
    """The server's key and certificate as two files (Kafka's PEM keystore holds both)."""
    text = certs.server.read_text()
    key, cert = workdir / "server.key", workdir / "server.crt"
    key.write_text(text[:text.index("-----END PRIVATE KEY-----") + 26])
    cert.write_text(text[text.index("-----BEGIN CERTIFICATE-----"):])
    return key, cert


class TlsMariaDB:
    def __init__(self, workdir: Path, certs: Certs) -> None:
        self.workdir, self.certs = workdir, certs
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> TlsMariaDB:
        data, sock = self.workdir / "data", self.workdir / "mysqld.sock"
        self.workdir.mkdir(parents=True, exist_ok=True)
        user = os.environ.get("USER") or "root"
        key, cert = server_key_and_cert(self.workdir, self.certs)
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

        wait_up(ready, 60, "the TLS MariaDB")
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
        key, cert = server_key_and_cert(self.workdir, self.certs)
        self.proc = subprocess.Popen(
            ["redis-server", "--port", "0", "--tls-port", str(self.port),
             "--bind", "127.0.0.1", "--tls-cert-file", str(cert), "--tls-key-file", str(key),
             "--tls-ca-cert-file", str(self.certs.ca), "--tls-auth-clients", "no",
             "--requirepass", REDIS_PASSWORD, "--save", "", "--appendonly", "no",
             "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_up(lambda: port_open(self.port), 20, "the TLS Redis")
        return self

    def url(self, password: str = REDIS_PASSWORD) -> str:
        return f"rediss://:{password}@127.0.0.1:{self.port}/0?ssl_ca_certs={self.certs.ca}"

    def stop(self) -> None:
        _stop(self.proc)
        self.proc = None
