#!/usr/bin/env python3
"""Start, stop and check the local services memstream's tests run against.

    python3 scripts/services.py up [kafka redis mariadb prometheus]
    python3 scripts/services.py down [...]
    python3 scripts/services.py status

Every service runs on loopback, keeps its data, log and pid file under
``.services/<name>/`` and is stopped by that pid only. ``up`` is idempotent: a
service whose pid is alive and whose port answers is left alone. Kafka runs in
KRaft mode from the ``org.apache.kafka:kafka_2.13`` jars on Maven Central; the
jars are cached in ``$MEMSTREAM_CACHE`` (default ``~/.cache/memstream``) so a
second start does not download again. Only the standard library is used, so
this runs before any virtual environment exists.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE = Path(os.environ.get("MEMSTREAM_SERVICES_DIR", ROOT / ".services"))
CACHE = Path(os.environ.get("MEMSTREAM_CACHE", Path.home() / ".cache" / "memstream"))
KAFKA_VERSION = os.environ.get("MEMSTREAM_KAFKA_VERSION", "3.9.1")

PORTS = {
    "kafka": int(os.environ.get("MEMSTREAM_TEST_KAFKA_PORT", "19092")),
    "kafka-controller": int(os.environ.get("MEMSTREAM_TEST_KAFKA_CONTROLLER_PORT", "19093")),
    "redis": int(os.environ.get("MEMSTREAM_TEST_REDIS_PORT", "16379")),
    "mariadb": int(os.environ.get("MEMSTREAM_TEST_MYSQL_PORT", "13306")),
    "prometheus": int(os.environ.get("MEMSTREAM_TEST_PROMETHEUS_PORT", "19090")),
}
ALL = ["kafka", "redis", "mariadb"]
OPTIONAL = ["prometheus"]

KAFKA_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>memstream.local</groupId><artifactId>kafka-runtime</artifactId>
  <version>1</version><packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>{version}</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-reload4j</artifactId>
      <version>1.7.36</version></dependency>
  </dependencies>
</project>
"""

LOG4J = """log4j.rootLogger=WARN, file
log4j.logger.kafka=INFO
log4j.logger.kafka.server.KafkaServer=INFO
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


def log(msg: str) -> None:
    print(f"[services] {msg}", flush=True)


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def pid_of(name: str) -> int | None:
    path = STATE / name / "pid"
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    # a zombie child of nobody counts as gone
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return None
    except OSError:
        pass
    return pid


def spawn(name: str, argv: list[str], env: dict[str, str] | None = None) -> int:
    d = STATE / name
    d.mkdir(parents=True, exist_ok=True)
    out = open(d / "stdout.log", "ab")
    proc = subprocess.Popen(
        argv,
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    (d / "pid").write_text(str(proc.pid))
    return proc.pid


def wait_until(name: str, check, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pid_of(name) is None:
            tail = ""
            for f in ("stdout.log", "server.log"):
                p = STATE / name / f
                if p.exists():
                    tail += p.read_text(errors="replace")[-3000:]
            raise SystemExit(f"{name} exited during start-up:\n{tail}")
        if check():
            return
        time.sleep(0.25)
    raise SystemExit(f"{name} did not answer within {timeout:.0f}s (see {STATE / name})")


# --------------------------------------------------------------------- kafka
def kafka_jars() -> Path:
    lib = CACHE / f"kafka-{KAFKA_VERSION}" / "lib"
    marker = lib / ".complete"
    if marker.exists():
        return lib
    if shutil.which("mvn") is None:
        raise SystemExit("Maven (mvn) is needed once to fetch the Kafka jars")
    work = lib.parent
    work.mkdir(parents=True, exist_ok=True)
    (work / "pom.xml").write_text(KAFKA_POM.format(version=KAFKA_VERSION))
    log(f"fetching Kafka {KAFKA_VERSION} jars from Maven Central into {lib}")
    subprocess.run(
        [
            "mvn", "-q", "-B", "-f", str(work / "pom.xml"),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={lib}", "-DincludeScope=runtime",
        ],
        check=True,
    )
    marker.write_text(KAFKA_VERSION)
    return lib


def kafka_up() -> None:
    port, cport = PORTS["kafka"], PORTS["kafka-controller"]
    if pid_of("kafka") and port_open(port):
        log(f"kafka already running on 127.0.0.1:{port}")
        return
    lib = kafka_jars()
    d = STATE / "kafka"
    data = d / "data"
    d.mkdir(parents=True, exist_ok=True)
    props = d / "server.properties"
    props.write_text(
        "\n".join(
            [
                "process.roles=broker,controller",
                "node.id=1",
                f"controller.quorum.voters=1@127.0.0.1:{cport}",
                f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
                "controller.listener.names=CONTROLLER",
                "inter.broker.listener.name=PLAINTEXT",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                f"log.dirs={data}",
                "num.partitions=1",
                "auto.create.topics.enable=true",
                "offsets.topic.replication.factor=1",
                "offsets.topic.num.partitions=4",
                "transaction.state.log.replication.factor=1",
                "transaction.state.log.min.isr=1",
                "group.initial.rebalance.delay.ms=0",
                "log.retention.hours=24",
                "delete.topic.enable=true",
                "",
            ]
        )
    )
    (d / "log4j.properties").write_text(LOG4J.format(log=d / "server.log"))
    java = [
        "java", "-Xms256m", "-Xmx768m", "-XX:+UseG1GC",
        f"-Dlog4j.configuration=file:{d / 'log4j.properties'}",
        "-cp", f"{lib}/*",
    ]
    if not (data / "meta.properties").exists():
        cluster_id = (
            __import__("base64").urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        )
        subprocess.run(
            [*java, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    spawn("kafka", [*java, "kafka.Kafka", str(props)])
    log(f"kafka starting on 127.0.0.1:{port}")

    def ready() -> bool:
        server_log = d / "server.log"
        return port_open(port) and server_log.exists() and (
            "Kafka Server started" in server_log.read_text(errors="replace")
            or "[KafkaRaftServer nodeId=1] Kafka Server started" in server_log.read_text(errors="replace")
        )

    # the log is appended on restarts: remember its size before the start
    wait_until("kafka", ready, 120)


# --------------------------------------------------------------------- redis
def redis_up() -> None:
    port = PORTS["redis"]
    if pid_of("redis") and port_open(port):
        log(f"redis already running on 127.0.0.1:{port}")
        return
    d = STATE / "redis"
    d.mkdir(parents=True, exist_ok=True)
    spawn(
        "redis",
        [
            "redis-server", "--port", str(port), "--bind", "127.0.0.1",
            "--dir", str(d), "--save", "", "--appendonly", "no",
            "--daemonize", "no", "--protected-mode", "no",
        ],
    )
    wait_until("redis", lambda: port_open(port), 30)
    log(f"redis up on 127.0.0.1:{port}")


# ------------------------------------------------------------------- mariadb
def mariadb_up() -> None:
    port = PORTS["mariadb"]
    if pid_of("mariadb") and port_open(port):
        log(f"mariadb already running on 127.0.0.1:{port}")
        return
    d = STATE / "mariadb"
    data = d / "data"
    sock = d / "mysqld.sock"
    d.mkdir(parents=True, exist_ok=True)
    user = os.environ.get("USER") or subprocess.run(
        ["id", "-un"], capture_output=True, text=True, check=True
    ).stdout.strip()
    fresh = not (data / "mysql").exists()
    if fresh:
        subprocess.run(
            [
                "mariadb-install-db", f"--datadir={data}", f"--user={user}",
                "--auth-root-authentication-method=normal", "--skip-test-db",
                "--no-defaults",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    spawn(
        "mariadb",
        [
            "mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={sock}",
            f"--port={port}", "--bind-address=127.0.0.1", f"--user={user}",
            f"--pid-file={d / 'mariadbd.pid'}", f"--log-error={d / 'error.log'}",
            "--innodb-buffer-pool-size=256M", "--innodb-flush-log-at-trx-commit=2",
            "--max-connections=500", "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_unicode_ci", "--skip-name-resolve",
        ],
    )

    def ready() -> bool:
        if not port_open(port):
            return False
        r = subprocess.run(
            ["mariadb", f"--socket={sock}", "-uroot", "-e", "SELECT 1"],
            capture_output=True,
        )
        return r.returncode == 0

    wait_until("mariadb", ready, 60)
    sql = (
        "CREATE DATABASE IF NOT EXISTS memstream CHARACTER SET utf8mb4;"
        "CREATE USER IF NOT EXISTS 'memstream'@'127.0.0.1' IDENTIFIED BY 'memstream';"
        "CREATE USER IF NOT EXISTS 'memstream'@'localhost' IDENTIFIED BY 'memstream';"
        "GRANT ALL PRIVILEGES ON *.* TO 'memstream'@'127.0.0.1';"
        "GRANT ALL PRIVILEGES ON *.* TO 'memstream'@'localhost';"
        "FLUSH PRIVILEGES;"
    )
    subprocess.run(["mariadb", f"--socket={sock}", "-uroot", "-e", sql], check=True)
    log(f"mariadb up on 127.0.0.1:{port} (user memstream, database memstream)")


# ---------------------------------------------------------------- prometheus
def prometheus_up() -> None:
    port = PORTS["prometheus"]
    if pid_of("prometheus") and port_open(port):
        log(f"prometheus already running on 127.0.0.1:{port}")
        return
    d = STATE / "prometheus"
    d.mkdir(parents=True, exist_ok=True)
    config = Path(os.environ.get("MEMSTREAM_PROMETHEUS_CONFIG", d / "prometheus.yml"))
    if not config.exists():
        config.write_text("global:\n  scrape_interval: 1s\nscrape_configs: []\n")
    spawn(
        "prometheus",
        [
            "prometheus", f"--config.file={config}", f"--storage.tsdb.path={d / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}", "--web.enable-lifecycle",
        ],
    )
    wait_until("prometheus", lambda: port_open(port), 60)
    log(f"prometheus up on 127.0.0.1:{port}")


# ---------------------------------------------------------------------- down
def down(name: str) -> None:
    pid = pid_of(name)
    if pid is None:
        log(f"{name} not running")
        (STATE / name / "pid").unlink(missing_ok=True)
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and pid_of(name) is not None:
        time.sleep(0.2)
    if pid_of(name) is not None:
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
    (STATE / name / "pid").unlink(missing_ok=True)
    log(f"{name} stopped (pid {pid})")


UP = {"kafka": kafka_up, "redis": redis_up, "mariadb": mariadb_up, "prometheus": prometheus_up}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"up", "down", "status", "jars"}:
        print(__doc__)
        return 2
    cmd, names = argv[0], argv[1:] or ALL
    unknown = [n for n in names if n not in UP]
    if unknown:
        print(f"unknown service(s): {', '.join(unknown)}; known: {', '.join(UP)}")
        return 2
    if cmd == "jars":
        print(kafka_jars())
    elif cmd == "up":
        for n in names:
            UP[n]()
    elif cmd == "down":
        for n in reversed(names if argv[1:] else ALL + OPTIONAL):
            down(n)
    else:
        for n in ALL + OPTIONAL:
            pid = pid_of(n)
            state = f"pid {pid}" if pid else "stopped"
            print(f"{n:<11} {state:<12} port {PORTS[n]} {'open' if port_open(PORTS[n]) else 'closed'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
