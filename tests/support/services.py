"""Where the shared test services listen, and private instances a test may stop."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from aiokafka.admin import AIOKafkaAdminClient

from streams.devtools.embedded_broker import free_port as free_port

KAFKA_PORT = int(os.environ.get("MEMSTREAM_TEST_KAFKA_PORT", "19092"))
REDIS_PORT = int(os.environ.get("MEMSTREAM_TEST_REDIS_PORT", "16379"))
MYSQL_PORT = int(os.environ.get("MEMSTREAM_TEST_MYSQL_PORT", "13306"))
PROMETHEUS_PORT = int(os.environ.get("MEMSTREAM_TEST_PROMETHEUS_PORT", "19090"))
# the real providers (``scripts/services.py up memos mem0``) and their fake model
MEMOS_PORT = int(os.environ.get("MEMSTREAM_TEST_MEMOS_PORT", "18001"))
MEM0_PORT = int(os.environ.get("MEMSTREAM_TEST_MEM0_PORT", "18002"))
FAKE_OPENAI_PORT = int(os.environ.get("MEMSTREAM_TEST_FAKE_OPENAI_PORT", "18100"))
MYSQL_USER = "memstream"
MYSQL_PASSWORD = "memstream"

KAFKA_BROKER = f"kafka://127.0.0.1:{KAFKA_PORT}"
KAFKA_BOOTSTRAP = f"127.0.0.1:{KAFKA_PORT}"


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def require_services() -> None:
    missing = [
        name for name, port in
        (("kafka", KAFKA_PORT), ("redis", REDIS_PORT), ("mariadb", MYSQL_PORT))
        if not port_open(port)
    ]
    if missing:
        raise RuntimeError(
            f"integration services not running: {', '.join(missing)} — run `make services` first"
        )


def mysql_url(database: str, port: int = MYSQL_PORT) -> str:
    return f"mysql+aiomysql://{MYSQL_USER}:{MYSQL_PASSWORD}@127.0.0.1:{port}/{database}"


def mysql_cli(sql: str, port: int = MYSQL_PORT, database: str | None = None) -> str:
    argv = ["mariadb", "-h127.0.0.1", f"-P{port}", f"-u{MYSQL_USER}", f"-p{MYSQL_PASSWORD}",
            "--batch", "--skip-column-names", "-e", sql]
    if database:
        argv.append(database)
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def create_database(name: str, port: int = MYSQL_PORT) -> str:
    """A new, empty database (an old one of that name is dropped first); its URL."""
    mysql_cli(f"DROP DATABASE IF EXISTS {name}; CREATE DATABASE {name} CHARACTER SET utf8mb4",
              port)
    return mysql_url(name, port)


def drop_database(name: str, port: int = MYSQL_PORT) -> None:
    mysql_cli(f"DROP DATABASE IF EXISTS {name}", port)


async def migrated_database(name: str, port: int = MYSQL_PORT) -> str:
    """:func:`create_database` with the schema at the newest migration; its URL."""
    from pydantic import SecretStr

    from streams.adapters.db.engine import create_engine
    from streams.adapters.db.migrate import upgrade
    from streams.settings import DatabaseSettings

    url = create_database(name, port)
    engine = create_engine(DatabaseSettings(url=SecretStr(url)))
    try:
        await upgrade(engine)
    finally:
        await engine.dispose()
    return url


async def delete_topics_containing(marker: str, bootstrap: str = KAFKA_BOOTSTRAP) -> int:
    """Delete the topics whose name contains ``marker`` (a run's own id), Faust's
    internal ones included; returns how many. A broker that keeps every run's
    topics makes each client's full metadata refresh slower, run after run."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        names = [t for t in await admin.list_topics() if marker in t]
        if names:
            await admin.delete_topics(names)
        return len(names)
    finally:
        await admin.close()


def provider_database(up: bool) -> None:
    """Start or stop the PostgreSQL of the real providers (``scripts/services.py``),
    the outage MemOS and Mem0 see when their database goes away."""
    script = Path(__file__).resolve().parents[2] / "scripts" / "services.py"
    subprocess.run([sys.executable, str(script), "up" if up else "down", "postgres"],
                   check=True, stdout=subprocess.DEVNULL, timeout=120)


def unique(prefix: str = "t") -> str:
    return f"{prefix}{uuid.uuid4().hex[:10]}"


@dataclass
class PrivateRedis:
    """A redis-server of the test's own, stopped and started by its pid."""

    port: int
    workdir: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.workdir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_up(lambda: port_open(self.port), 20, "private redis")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(20)
        self.proc = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


@dataclass
class PrivateMariaDB:
    """A mariadbd of the test's own (its data directory survives a stop)."""

    port: int
    workdir: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        data = self.workdir / "data"
        sock = self.workdir / "sock"
        user = os.environ.get("USER") or subprocess.run(
            ["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
        if not (data / "mysql").exists():
            self.workdir.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                ["mariadb-install-db", "--no-defaults", f"--datadir={data}", f"--user={user}",
                 "--auth-root-authentication-method=normal", "--skip-test-db"],
                check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            first = True
        else:
            first = False
        self.proc = subprocess.Popen(
            ["mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={sock}",
             f"--port={self.port}", "--bind-address=127.0.0.1", f"--user={user}",
             "--innodb-buffer-pool-size=64M", "--skip-name-resolve",
             f"--log-error={self.workdir / 'error.log'}",
             f"--pid-file={self.workdir / 'mariadbd.pid'}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        def ready() -> bool:
            return port_open(self.port) and subprocess.run(
                ["mariadb", f"--socket={sock}", "-uroot", "-e", "SELECT 1"], capture_output=True
            ).returncode == 0
        wait_up(ready, 60, "private mariadb")
        if first:
            subprocess.run(
                ["mariadb", f"--socket={sock}", "-uroot", "-e",
                 "CREATE DATABASE memstream; "
                 f"CREATE USER '{MYSQL_USER}'@'127.0.0.1' IDENTIFIED BY '{MYSQL_PASSWORD}'; "
                 f"GRANT ALL ON *.* TO '{MYSQL_USER}'@'127.0.0.1'; FLUSH PRIVILEGES;"],
                check=True,
            )

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(60)
        self.proc = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    @property
    def url(self) -> str:
        return mysql_url("memstream", self.port)


def wait_up(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise TimeoutError(f"{what} did not come up in {timeout}s")
