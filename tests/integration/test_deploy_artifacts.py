"""The deployment and alerting artifacts validate with the real tools.

* ``docker-compose.yml``: the Docker Compose v2 CLI's ``config`` command (no
  Docker engine needed), built by ``scripts/install-compose.sh``; its Kafka
  settings boot a real KRaft broker from the jars ``scripts/services.py`` keeps.
* ``Dockerfile`` / ``.dockerignore``: BuildKit's own Dockerfile frontend and
  linter (what ``docker build --check`` runs; ``tests/data/dockerfile-check``),
  the instructions the image relies on, the build context builds the package,
  the health check follows ``/health/live``.
* ``k8s/``: built-in kinds with ``kubernetes-validate`` (strict: unknown fields
  fail); ServiceMonitor, PrometheusRule and ScaledObject against the OpenAPI
  schemas of their published CRDs, vendored in ``tests/data/crds/``.
* ``deploy/prometheus/``: ``promtool check rules``, ``promtool test rules`` and
  ``promtool check config``.
* Every PromQL expression of the dashboards and the alerting rules parses
  (``promtool check rules`` on a generated rules file) and names only metrics of
  the catalog in ``streams/metrics.py``.

Each check has a negative control, so a validator that accepts everything
would make a test fail.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator
from functools import cache
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import schema_contents
from prometheus_client import Counter, Gauge, Histogram
from referencing import Registry, Resource

from streams import metrics as metric_catalog
from streams.cli.env_check import setting_variables, unknown_variables
from streams.settings import HealthSettings, KafkaSettings, WebSettings
from tests.support.services import free_port
from tests.support.tree import files_under

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
K8S = ROOT / "k8s"
PROM = ROOT / "deploy" / "prometheus"
GRAFANA = ROOT / "deploy" / "grafana"
DASHBOARDS = GRAFANA / "dashboards"
CRDS = Path(__file__).resolve().parents[1] / "data" / "crds"
OPERATIONS_DOC = ROOT / "docs" / "operations.md"

# Kubernetes versions the manifests are checked against: an older one still
# widely run, and the newest kubernetes-validate knows.
K8S_VERSIONS = ["1.29.0", kubernetes_validate.latest_version()]

STATS_ENDPOINTS = (
    "/stats/overview",
    "/stats/memory-types",
    "/stats/trends",
    "/stats/top-agents",
    "/stats/cubes/",
    "/stats/search-trends",
)


def run(argv: list[str], *, timeout: float = 120, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)


def load_yaml_docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


# ====================================================================== compose
@pytest.fixture(scope="session")
def compose_bin() -> Path:
    """The Docker Compose CLI, built once into the cache folder by the project's script."""
    r = run(["bash", str(ROOT / "scripts" / "install-compose.sh")], timeout=1500)
    assert r.returncode == 0, f"scripts/install-compose.sh failed:\n{r.stdout}\n{r.stderr}"
    path = Path(r.stdout.strip().splitlines()[-1])
    assert path.is_file() and os.access(path, os.X_OK), path
    return path


def compose_env() -> dict[str, str]:
    # the defaults of the file, not whatever the developer's shell overrides
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MEMSTREAM_COMPOSE_", "COMPOSE_", "GRAFANA_ADMIN_"))
    }


@pytest.fixture(scope="session")
def compose_model(compose_bin: Path) -> dict[str, Any]:
    r = run(
        [
            str(compose_bin),
            "--project-directory",
            str(ROOT),
            "-f",
            str(COMPOSE_FILE),
            "config",
            "--format",
            "json",
        ],
        cwd=ROOT,
        env=compose_env(),
    )
    assert r.returncode == 0, f"docker compose config rejected docker-compose.yml:\n{r.stderr}"
    # warnings (obsolete keys, unset variables) count as failures too
    assert not r.stderr.strip(), f"docker compose config warned:\n{r.stderr}"
    model: dict[str, Any] = json.loads(r.stdout)
    return model


# the first test that needs the Compose CLI may build it: minutes on a fresh machine
COMPOSE_TIMEOUT = pytest.mark.timeout(1800)


@COMPOSE_TIMEOUT
def test_compose_config_validates(compose_model: dict[str, Any]) -> None:
    assert set(compose_model["services"]) == {
        "kafka",
        "mysql",
        "redis",
        "worker",
        "prometheus",
        "grafana",
    }


@COMPOSE_TIMEOUT
@pytest.mark.parametrize("breakage", ["undefined dependency", "unknown key", "bad healthcheck"])
def test_compose_config_rejects_a_broken_file(
    compose_bin: Path, tmp_path: Path, breakage: str
) -> None:
    doc = yaml.safe_load(COMPOSE_FILE.read_text())
    if breakage == "undefined dependency":
        doc["services"]["worker"]["depends_on"]["zookeeper"] = {"condition": "service_healthy"}
    elif breakage == "unknown key":
        doc["services"]["worker"]["healthcheck"]["every"] = "15s"
    else:
        doc["services"]["kafka"]["healthcheck"]["interval"] = "ten seconds"
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(yaml.safe_dump(doc))
    r = run(
        [str(compose_bin), "--project-directory", str(ROOT), "-f", str(broken), "config", "-q"],
        cwd=ROOT,
        env=compose_env(),
    )
    assert r.returncode != 0, f"compose accepted a file with {breakage}"


@COMPOSE_TIMEOUT
def test_compose_services_are_healthchecked_and_ordered(compose_model: dict[str, Any]) -> None:
    services = compose_model["services"]
    for name, svc in services.items():
        hc = svc.get("healthcheck") or {}
        assert hc.get("test") and not hc.get("disable"), f"{name} has no health check"
    worker_deps = services["worker"]["depends_on"]
    for dep in ("kafka", "mysql", "redis"):
        assert worker_deps[dep]["condition"] == "service_healthy", dep
    assert services["grafana"]["depends_on"]["prometheus"]["condition"] == "service_healthy"
    assert "worker" in services["prometheus"]["depends_on"]
    assert services["worker"]["build"]["context"] == str(ROOT)
    assert Path(services["worker"]["build"]["dockerfile"]).name == "Dockerfile"


def _check_setting_names(names: set[str], where: str) -> None:
    """Every ``MEMSTREAM_*`` name is one the worker accepts (streams/cli/env_check.py)."""
    bad = [u.name for u in unknown_variables(names, setting_variables())]
    assert not bad, f"{where} sets variables that are no memstream setting: {bad}"


@COMPOSE_TIMEOUT
def test_compose_worker_environment(compose_model: dict[str, Any]) -> None:
    services = compose_model["services"]
    env = services["worker"]["environment"]
    _check_setting_names(set(env), "docker-compose.yml (worker)")

    # Kafka: the broker the worker uses is a listener Kafka advertises under the service name
    kafka_env = services["kafka"]["environment"]
    broker = urlsplit(env["MEMSTREAM_KAFKA__BROKER"])
    assert broker.scheme == "kafka" and broker.hostname == "kafka"
    advertised = kafka_env["KAFKA_ADVERTISED_LISTENERS"].split(",")
    assert f"kafka:{broker.port}" in {a.split("://", 1)[1] for a in advertised}
    assert env["MEMSTREAM_KAFKA__PARTITIONS"] == kafka_env["KAFKA_NUM_PARTITIONS"]
    assert int(env["MEMSTREAM_KAFKA__PARTITIONS"]) == KafkaSettings().partitions

    # MySQL through aiomysql, with the credentials the mysql service creates
    db = urlsplit(env["MEMSTREAM_DATABASE__URL"])
    mysql_env = services["mysql"]["environment"]
    assert db.scheme == "mysql+aiomysql"
    assert (db.hostname, db.port or 3306) == ("mysql", 3306)
    assert db.username == mysql_env["MYSQL_USER"] and db.password == mysql_env["MYSQL_PASSWORD"]
    assert db.path.lstrip("/") == mysql_env["MYSQL_DATABASE"]

    redis = urlsplit(env["MEMSTREAM_REDIS__URL"])
    assert redis.scheme == "redis" and redis.hostname == "redis"

    # the web port: reachable from the other containers, scraped by Prometheus
    assert env["MEMSTREAM_WEB__HOST"] == "0.0.0.0"
    assert int(env["MEMSTREAM_WEB__PORT"]) == WebSettings().port == 6066
    published = {p["target"] for p in services["worker"]["ports"]}
    assert 6066 in published


@COMPOSE_TIMEOUT
def test_compose_kafka_is_reachable_from_the_host(compose_model: dict[str, Any]) -> None:
    """`memstream demo --broker kafka://localhost:9092` talks to the compose Kafka."""
    kafka = compose_model["services"]["kafka"]
    assert any(p["target"] == 9092 and str(p["published"]) == "9092" for p in kafka["ports"])
    advertised = kafka["environment"]["KAFKA_ADVERTISED_LISTENERS"].split(",")
    assert any(a.endswith("://localhost:9092") for a in advertised)
    assert kafka["environment"]["KAFKA_PROCESS_ROLES"] == "broker,controller"  # KRaft, no ZooKeeper
    assert kafka["image"].startswith("apache/kafka:")
    assert compose_model["services"]["mysql"]["image"].startswith("mysql:8")
    assert compose_model["services"]["redis"]["image"].startswith("redis:7")


@COMPOSE_TIMEOUT
def test_compose_mounts_and_provisioning(compose_model: dict[str, Any]) -> None:
    services = compose_model["services"]
    binds: dict[str, dict[str, str]] = {}
    for name, svc in services.items():
        for v in svc.get("volumes", []):
            if v["type"] == "bind":
                assert Path(v["source"]).exists(), f"{name} mounts missing {v['source']}"
                binds.setdefault(name, {})[v["target"]] = v["source"]

    prom = binds["prometheus"]
    config_target = next(t for t, s in prom.items() if s == str(PROM / "prometheus.yml"))
    alerts_target = next(t for t, s in prom.items() if s == str(PROM / "alerts.yml"))
    # prometheus.yml names its rule file relative to itself
    assert Path(config_target).parent == Path(alerts_target).parent
    prom_config = yaml.safe_load((PROM / "prometheus.yml").read_text())
    assert prom_config["rule_files"] == ["alerts.yml"]
    assert any(f"--config.file={config_target}" == c for c in services["prometheus"]["command"])
    # the scrape job is the one the alert rules select on, pointed at the worker service
    job = next(j for j in prom_config["scrape_configs"] if j["job_name"] == "memstream")
    sd = job["dns_sd_configs"][0]
    assert sd["names"] == ["worker"] and sd["port"] == 6066 and job["metrics_path"] == "/metrics"

    graf = binds["grafana"]
    prov_target = next(t for t, s in graf.items() if s == str(GRAFANA / "provisioning"))
    dash_target = next(t for t, s in graf.items() if s == str(DASHBOARDS))
    assert prov_target == "/etc/grafana/provisioning"
    provider = yaml.safe_load(
        (GRAFANA / "provisioning" / "dashboards" / "memstream.yml").read_text()
    )
    assert [p["options"]["path"] for p in provider["providers"]] == [dash_target]
    home = services["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert Path(home).parent == Path(dash_target) and (DASHBOARDS / Path(home).name).exists()

    sources = yaml.safe_load(
        (GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text()
    )
    by_type = {d["type"]: d for d in sources["datasources"]}
    prom_url = urlsplit(by_type["prometheus"]["url"])
    assert prom_url.hostname == "prometheus"
    assert any(p["target"] == prom_url.port for p in services["prometheus"]["ports"])
    stats = by_type["yesoreyeram-infinity-datasource"]
    assert urlsplit(stats["url"]).hostname == "worker" and urlsplit(stats["url"]).port == 6066
    assert (
        "yesoreyeram-infinity-datasource"
        in services["grafana"]["environment"]["GF_INSTALL_PLUGINS"]
    )


# Variables of the apache/kafka image that are not broker properties
_KAFKA_IMAGE_ENV = {
    "KAFKA_HEAP_OPTS",
    "KAFKA_JVM_PERFORMANCE_OPTS",
    "KAFKA_OPTS",
    "KAFKA_LOG4J_OPTS",
    "KAFKA_JMX_OPTS",
    "KAFKA_GC_LOG_OPTS",
    "KAFKA_VERSION",
}


def _kafka_properties(env: dict[str, str]) -> dict[str, str]:
    """KAFKA_* variables as the apache/kafka image turns them into server.properties."""
    props = {}
    for k, v in env.items():
        if k.startswith("KAFKA_") and k not in _KAFKA_IMAGE_ENV:
            name = (
                k[len("KAFKA_") :].lower().replace("___", "-").replace("__", "@").replace("_", ".")
            )
            props[name.replace("@", "_")] = v
    return props


async def _produce_first_then_describe(bootstrap: str, topic: str) -> Any:
    from aiokafka import AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        # a producer that comes first auto-creates the topic, as the demo may
        await producer.send_and_wait(topic, b"{}", key=b"c1")
    finally:
        await producer.stop()
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        return await admin.describe_topics([topic])
    finally:
        await admin.close()


@COMPOSE_TIMEOUT
def test_compose_kafka_settings_boot_a_real_kraft_broker(
    compose_model: dict[str, Any], tmp_path: Path
) -> None:
    """The compose Kafka's settings, moved to loopback ports, start a KRaft broker
    that a producer on the host listener can use, with the expected partitions."""
    kafka = compose_model["services"]["kafka"]
    props = _kafka_properties(kafka["environment"])
    # every listener port of the container gets a free loopback port here
    ports: dict[str, int] = {}
    for listener in props["listeners"].split(","):
        ports[listener.rsplit(":", 1)[1]] = free_port()

    def relocate(addresses: str) -> str:
        out = []
        for a in addresses.split(","):
            head, port = a.rsplit(":", 1)
            head = re.sub(r"//[^:/]*$", "//127.0.0.1", head) if "//" in head else head
            out.append(f"{head}:{ports.get(port, port)}")
        return ",".join(out)

    props["listeners"] = relocate(props["listeners"])
    # the advertised host listener carries the published port; it maps to 9092 inside
    published = {str(p["published"]): str(p["target"]) for p in kafka["ports"]}
    adv = []
    for a in props["advertised.listeners"].split(","):
        head, port = a.rsplit(":", 1)
        port = published.get(port, port) if head.endswith("//localhost") else port
        adv.append(f"{head}:{port}")
    props["advertised.listeners"] = relocate(",".join(adv))
    node, voter = props["controller.quorum.voters"].split("@")
    props["controller.quorum.voters"] = f"{node}@127.0.0.1:{ports[voter.rsplit(':', 1)[1]]}"
    props["log.dirs"] = str(tmp_path / "data")
    server_props = tmp_path / "server.properties"
    server_props.write_text("".join(f"{k}={v}\n" for k, v in sorted(props.items())))
    log4j = tmp_path / "log4j.properties"
    log4j.write_text(
        "log4j.rootLogger=INFO, file\nlog4j.appender.file=org.apache.log4j.FileAppender\n"
        f"log4j.appender.file.File={tmp_path / 'server.log'}\n"
        "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
        "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
    )
    jars = run([sys.executable, str(ROOT / "scripts" / "services.py"), "jars"], timeout=900)
    assert jars.returncode == 0, jars.stderr
    lib = jars.stdout.strip().splitlines()[-1]
    java = [
        "java",
        "-Xms128m",
        "-Xmx512m",
        f"-Dlog4j.configuration=file:{log4j}",
        "-cp",
        f"{lib}/*",
    ]
    fmt = run(
        [
            *java,
            "kafka.tools.StorageTool",
            "format",
            "-t",
            kafka["environment"]["CLUSTER_ID"],
            "-c",
            str(server_props),
        ]
    )
    assert fmt.returncode == 0, (
        f"StorageTool rejected the compose settings:\n{fmt.stdout}{fmt.stderr}"
    )

    host_port = ports["9092"]
    proc = subprocess.Popen(
        [*java, "kafka.Kafka", str(server_props)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", host_port)) == 0:
                    break
            assert time.monotonic() < deadline, "the broker did not open its host listener"
            time.sleep(0.3)
        described = asyncio.run(
            _produce_first_then_describe(f"127.0.0.1:{host_port}", "chat.messages")
        )
        assert len(described[0]["partitions"]) == KafkaSettings().partitions
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


# =================================================================== Dockerfile
def dockerfile_instructions() -> list[tuple[str, str]]:
    lines, buf = [], ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if buf and line.startswith("#"):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        word, _, rest = buf.strip().partition(" ")
        lines.append((word.upper(), rest.strip()))
        buf = ""
    return lines


def final_stage(instrs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    start = max(i for i, (w, _) in enumerate(instrs) if w == "FROM")
    return instrs[start:]


@pytest.fixture(scope="session")
def dockerfile_check(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """BuildKit's Dockerfile frontend as a small program (Go modules from the proxy)."""
    go = shutil.which("go")
    assert go, "Go is needed to build tests/data/dockerfile-check"
    out = tmp_path_factory.mktemp("dockerfile-check") / "dockerfile-check"
    r = run(
        [go, "build", "-o", str(out), "."],
        cwd=Path(__file__).resolve().parents[1] / "data" / "dockerfile-check",
        timeout=900,
    )
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.timeout(1200)
def test_dockerfile_passes_buildkit_checks(dockerfile_check: Path) -> None:
    r = run([str(dockerfile_check), str(DOCKERFILE)])
    assert r.returncode == 0, f"docker build --check would complain:\n{r.stdout}{r.stderr}"


@pytest.mark.timeout(1200)
@pytest.mark.parametrize(
    ("breakage", "old", "new"),
    [
        ("unknown HEALTHCHECK flag", "--interval=15s", "--intervall=15s"),
        ("shell-form CMD", 'CMD ["worker"]', "CMD worker"),
        ("legacy ENV form", "ENV PATH=", "ENV PATH "),
    ],
)
def test_dockerfile_check_catches_mistakes(
    dockerfile_check: Path, tmp_path: Path, breakage: str, old: str, new: str
) -> None:
    text = DOCKERFILE.read_text()
    assert old in text
    (tmp_path / "Dockerfile").write_text(text.replace(old, new, 1))
    r = run([str(dockerfile_check), str(tmp_path / "Dockerfile")])
    assert r.returncode != 0, f"{breakage} passed the check"


def test_dockerfile_runs_the_worker_as_non_root() -> None:
    instrs = dockerfile_instructions()
    args = {r.split("=", 1)[0]: r.split("=", 1)[1] for w, r in instrs if w == "ARG" and "=" in r}
    bases = [
        re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), r.split()[0])
        for w, r in instrs
        if w == "FROM"
    ]
    assert all(b.startswith("python:3.11-slim") for b in bases), bases
    final = final_stage(instrs)
    words = [w for w, _ in final]
    user = [r for w, r in final if w == "USER"]
    assert user, "the runtime stage sets no USER"
    uid = user[-1].split(":")[0]
    assert uid not in {"root", "0"}
    assert words.index("USER") < words.index("ENTRYPOINT")
    assert json.loads(dict(final)["ENTRYPOINT"]) == ["memstream"]
    assert json.loads(dict(final)["CMD"]) == ["worker"]
    assert "6066" in dict(final)["EXPOSE"].split()
    assert "/health/live" in dict(final)["HEALTHCHECK"]
    runs = " ".join(r for w, r in instrs if w == "RUN")
    assert re.search(r"pip install (--no-deps )?\.", runs)
    copies = [r.split() for w, r in final if w == "COPY" and not r.startswith("--from")]
    assert ["alembic.ini", "./"] in copies
    assert ["migrations", "./migrations"] in copies
    # the worker finds the migrations through MEMSTREAM_MIGRATIONS_DIR
    workdir = [r for w, r in final if w == "WORKDIR"][-1]
    env = " ".join(r for w, r in final if w == "ENV")
    assert f"MEMSTREAM_MIGRATIONS_DIR={workdir}/migrations" in env
    assert "MEMSTREAM_WEB__HOST=0.0.0.0" in env
    _check_setting_names(set(re.findall(r"(MEMSTREAM_\w+)=", env)), "Dockerfile")


def _dockerignore_patterns() -> list[tuple[bool, re.Pattern[str]]]:
    out = []
    for line in DOCKERIGNORE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pat = os.path.normpath(line.lstrip("!").strip("/"))
        rx = ""
        i = 0
        while i < len(pat):
            if pat.startswith("**", i):
                rx += ".*"
                i += 2
                if pat.startswith("/", i):
                    rx = rx[:-2] + "(.*/)?"
                    i += 1
            elif pat[i] == "*":
                rx += "[^/]*"
                i += 1
            elif pat[i] == "?":
                rx += "[^/]"
                i += 1
            elif pat[i] == "[":
                j = pat.index("]", i)
                rx += pat[i : j + 1]
                i = j + 1
            else:
                rx += re.escape(pat[i])
                i += 1
        out.append((negate, re.compile(rx + "$")))
    return out


def in_build_context(rel: str) -> bool:
    """Docker's rule: the last pattern that matches the path or one of its parents decides."""
    parts = rel.split("/")
    candidates = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    excluded = False
    for negate, rx in _dockerignore_patterns():
        if any(rx.match(c) for c in candidates):
            excluded = not negate
    return not excluded


def build_context_files() -> list[str]:
    out = []
    for p in files_under(ROOT, {".git", ".venv"}):
        rel = p.relative_to(ROOT).as_posix()
        if not p.is_file():
            continue
        if in_build_context(rel):
            out.append(rel)
    return sorted(out)


def test_dockerignore_matcher_follows_docker_rules() -> None:
    # negative controls for the matcher the next test relies on
    assert not in_build_context(".venv/bin/python")
    assert not in_build_context("tests/unit/__init__.py")
    assert not in_build_context("streams/__pycache__/cli.cpython-311.pyc")
    assert in_build_context("streams/cli/main.py")


def test_docker_build_context_builds_the_package(tmp_path: Path) -> None:
    """What .dockerignore lets through is enough for every COPY and for `pip install .`."""
    files = build_context_files()
    for word, rest in dockerfile_instructions():
        if word == "COPY" and not rest.startswith("--from"):
            for src in rest.split()[:-1]:
                assert any(f == src or f.startswith(src.rstrip("/") + "/") for f in files), (
                    f"COPY {src}: not in the build context"
                )
    assert "migrations/env.py" in files and "alembic.ini" in files
    assert not any(f.startswith(("tests/", ".services/", "bench/")) for f in files)

    ctx = tmp_path / "ctx"
    for rel in files:
        (ctx / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, ctx / rel)
    r = run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path / "out"),
            str(ctx),
        ],
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    wheel = next((tmp_path / "out").glob("memstream-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        entry_points = next(z.read(n).decode() for n in names if n.endswith("entry_points.txt"))
    assert {"streams/cli/main.py", "streams/cli/worker.py", "agents/__init__.py"} <= names
    assert re.search(r"^memstream\s*=\s*streams\.cli:main$", entry_points, re.M)


class _Health(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        code = self.status if self.path == "/health/live" else 404
        self.send_response(code)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def health_server() -> Iterator[tuple[int, type[_Health]]]:
    handler = type("Handler", (_Health,), {"status": 200})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], handler
    finally:
        server.shutdown()
        server.server_close()


@COMPOSE_TIMEOUT
def test_healthcheck_follows_health_live(
    compose_model: dict[str, Any], health_server: tuple[int, type[_Health]]
) -> None:
    """The image's HEALTHCHECK (and the compose copy of it) passes on 200 only."""
    hc = dict(final_stage(dockerfile_instructions()))["HEALTHCHECK"]
    argv = json.loads(hc[hc.index("CMD") + 3 :].strip())
    compose_test = compose_model["services"]["worker"]["healthcheck"]["test"]
    assert compose_test == ["CMD", *argv], "docker-compose.yml and Dockerfile health checks differ"
    assert argv[0] == "python"
    argv = [sys.executable, *argv[1:]]

    port, handler = health_server
    env = {**os.environ, "MEMSTREAM_WEB__PORT": str(port)}
    assert run(argv, env=env, timeout=30).returncode == 0
    handler.status = 503
    assert run(argv, env=env, timeout=30).returncode != 0
    env["MEMSTREAM_WEB__PORT"] = str(free_port())  # nobody listens
    assert run(argv, env=env, timeout=30).returncode != 0


# =================================================================== Kubernetes
def k8s_documents() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in load_yaml_docs(path):
            out.append((path.name, doc))
    return out


def by_kind(kind: str) -> dict[str, Any]:
    docs = [d for _, d in k8s_documents() if d["kind"] == kind]
    assert len(docs) == 1, f"expected one {kind}, found {len(docs)}"
    return docs[0]


def _structural_to_jsonschema(node: dict[str, Any]) -> dict[str, Any]:
    """A CRD's structural OpenAPI v3 schema as JSON Schema 2020-12, strict like the
    API server's field validation: unknown fields fail unless the schema says
    x-kubernetes-preserve-unknown-fields."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key in {"nullable", "format"}:
            continue  # OpenAPI-only keywords; `format` (int32, byte, …) is advisory
        if key == "properties":
            out[key] = {name: _structural_to_jsonschema(sub) for name, sub in value.items()}
        elif key in {"items", "not"} or (key == "additionalProperties" and isinstance(value, dict)):
            out[key] = _structural_to_jsonschema(value)
        elif key in {"anyOf", "allOf", "oneOf"}:
            out[key] = [_structural_to_jsonschema(sub) for sub in value]
        elif key == "pattern" and "(?i)" in value:
            # Go's regexp takes inline flags anywhere, Python's only at the start
            out[key] = "(?i)" + value.replace("(?i)", "")
        else:
            out[key] = value
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if (
        node.get("type") == "object"
        and "properties" in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@cache
def crd_validators() -> dict[tuple[str, str], jsonschema.Validator]:
    version = kubernetes_validate.latest_version()
    defs = schema_contents(
        f"kubernetes-json-schema/v{version}-local-strict/_definitions.json", version
    )
    registry: Registry[Any] = Resource.from_contents(defs) @ Registry()
    out: dict[tuple[str, str], jsonschema.Validator] = {}
    for path in sorted(CRDS.glob("*.json")):
        crd = json.loads(path.read_text())
        schema = _structural_to_jsonschema(crd["openAPIV3Schema"])
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        # a CRD says only `metadata: object`; the API server checks it as ObjectMeta
        schema["properties"]["metadata"] = {
            "$ref": f"{defs['$id']}#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
        }
        schema["properties"]["apiVersion"] = {"const": f"{crd['group']}/{crd['version']}"}
        schema["properties"]["kind"] = {"const": crd["kind"]}
        schema["required"] = sorted(
            {*schema.get("required", []), "apiVersion", "kind", "metadata", "spec"}
        )
        jsonschema.Draft202012Validator.check_schema(schema)
        out[(f"{crd['group']}/{crd['version']}", crd["kind"])] = jsonschema.Draft202012Validator(
            schema, registry=registry
        )
    return out


def validate_k8s(doc: dict[str, Any], version: str) -> None:
    """Raise when ``doc`` is not a valid object; an unknown kind is an error too."""
    key = (doc.get("apiVersion", ""), doc.get("kind", ""))
    crd = crd_validators().get(key)
    if crd is not None:
        errors = sorted(crd.iter_errors(doc), key=lambda e: list(e.path))
        if errors:
            raise AssertionError(
                "; ".join(f"{'.'.join(map(str, e.path))}: {e.message}" for e in errors)
            )
        return
    kubernetes_validate.validate(doc, version, strict=True)


def test_crd_schemas_are_vendored() -> None:
    assert set(crd_validators()) == {
        ("monitoring.coreos.com/v1", "ServiceMonitor"),
        ("monitoring.coreos.com/v1", "PrometheusRule"),
        ("keda.sh/v1alpha1", "ScaledObject"),
    }


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize(
    ("filename", "doc"), k8s_documents(), ids=[f"{f}:{d['kind']}" for f, d in k8s_documents()]
)
def test_kubernetes_manifest_validates(filename: str, doc: dict[str, Any], version: str) -> None:
    validate_k8s(doc, version)


@pytest.mark.parametrize(
    "breakage",
    [
        "Deployment: containerPort is a string",
        "Deployment: misspelt field",
        "Service: port is a string",
        "PodDisruptionBudget: unknown field",
        "ServiceMonitor: endpoints is not a list",
        "ServiceMonitor: misspelt field",
        "ScaledObject: maxReplicaCount is a string",
        "ScaledObject: trigger without type",
        "PrometheusRule: rule without expr",
        "ScaledObject: bad metadata name type",
    ],
)
def test_kubernetes_validation_catches_errors(breakage: str) -> None:
    kind = breakage.split(":")[0]
    doc = copy.deepcopy(by_kind(kind))
    if breakage == "Deployment: containerPort is a string":
        doc["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "http"
    elif breakage == "Deployment: misspelt field":
        doc["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    elif breakage == "Service: port is a string":
        doc["spec"]["ports"][0]["port"] = "6066"
    elif breakage == "PodDisruptionBudget: unknown field":
        doc["spec"]["maxUnavailible"] = 1
    elif breakage == "ServiceMonitor: endpoints is not a list":
        doc["spec"]["endpoints"] = doc["spec"]["endpoints"][0]
    elif breakage == "ServiceMonitor: misspelt field":
        doc["spec"]["endpoints"][0]["intervall"] = "15s"
    elif breakage == "ScaledObject: maxReplicaCount is a string":
        doc["spec"]["maxReplicaCount"] = "eight"
    elif breakage == "ScaledObject: trigger without type":
        del doc["spec"]["triggers"][0]["type"]
    elif breakage == "PrometheusRule: rule without expr":
        del doc["spec"]["groups"][0]["rules"][0]["expr"]
    else:
        doc["metadata"]["name"] = 8
    with pytest.raises((AssertionError, jsonschema.ValidationError)):
        validate_k8s(doc, K8S_VERSIONS[-1])


def test_kustomization_lists_every_manifest() -> None:
    kust = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert (
        kust["apiVersion"] == "kustomize.config.k8s.io/v1beta1" and kust["kind"] == "Kustomization"
    )
    manifests = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml", "secret.example.yaml"}
    assert sorted(kust["resources"]) == sorted(manifests)
    assert len(kust["resources"]) == len(set(kust["resources"]))
    for _, doc in k8s_documents():
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == kust["namespace"], doc["metadata"]["name"]
    images = {i["name"] for i in kust.get("images", [])}
    container_image = by_kind("Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
    assert container_image.split(":")[0] in images


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_kubernetes_objects_fit_together() -> None:
    deploy = by_kind("Deployment")
    service = by_kind("Service")
    pdb = by_kind("PodDisruptionBudget")
    monitor = by_kind("ServiceMonitor")
    config = by_kind("ConfigMap")
    secret = by_kind("Secret")
    pod = deploy["spec"]["template"]
    pod_labels = pod["metadata"]["labels"]
    assert "replicas" not in deploy["spec"], "the ScaledObject owns the replica count"
    assert _matches(deploy["spec"]["selector"]["matchLabels"], pod_labels)
    assert _matches(service["spec"]["selector"], pod_labels)
    assert _matches(pdb["spec"]["selector"]["matchLabels"], pod_labels)
    assert _matches(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    # the job label the alert rules select on is the Service's name
    assert service["metadata"]["name"] == "memstream"

    (container,) = pod["spec"]["containers"]
    port = next(p for p in container["ports"] if p["name"] == "web")
    assert port["containerPort"] == 6066 == int(config["data"]["MEMSTREAM_WEB__PORT"])
    svc_port = next(p for p in service["spec"]["ports"] if p["name"] == "web")
    assert svc_port["port"] == 6066 and svc_port["targetPort"] == "web"
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["web"]
    assert monitor["spec"]["endpoints"][0]["path"] == "/metrics"

    assert container["livenessProbe"]["httpGet"] == {"path": "/health/live", "port": "web"}
    assert container["startupProbe"]["httpGet"] == {"path": "/health/live", "port": "web"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/health/ready", "port": "web"}
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][kind])

    env_from = {(next(iter(e)), next(iter(e.values()))["name"]) for e in container["envFrom"]}
    assert env_from == {
        ("configMapRef", config["metadata"]["name"]),
        ("secretRef", secret["metadata"]["name"]),
    }
    assert config["data"]["MEMSTREAM_WEB__HOST"] == "0.0.0.0"
    # the keys, and the ones its comments suggest
    configmap_text = (K8S / "configmap.yaml").read_text()
    suggested = set(re.findall(r"MEMSTREAM_[A-Z0-9_]+", configmap_text))
    _check_setting_names(suggested, "k8s/configmap.yaml")
    _check_setting_names(set(secret["stringData"]), "k8s/secret.example.yaml")
    assert {"MEMSTREAM_DATABASE__URL", "MEMSTREAM_REDIS__URL"} <= set(secret["stringData"])
    assert not set(config["data"]) & set(secret["stringData"])
    assert urlsplit(secret["stringData"]["MEMSTREAM_DATABASE__URL"]).scheme == "mysql+aiomysql"

    # the image's user, so that runAsNonRoot holds
    user = [r for w, r in final_stage(dockerfile_instructions()) if w == "USER"][-1]
    assert pod["spec"]["securityContext"]["runAsUser"] == int(user.split(":")[0])
    # Faust's state directory is a writable scratch volume under a read-only root
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert config["data"]["MEMSTREAM_KAFKA__DATA_DIR"] in mounts
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_scaling_is_bounded_by_the_partition_count() -> None:
    scaled = by_kind("ScaledObject")
    config = by_kind("ConfigMap")["data"]
    deploy = by_kind("Deployment")
    partitions = int(config["MEMSTREAM_KAFKA__PARTITIONS"])
    assert partitions == KafkaSettings().partitions
    spec = scaled["spec"]
    assert spec["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": deploy["metadata"]["name"],
    }
    assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"] == partitions
    broker = urlsplit(config["MEMSTREAM_KAFKA__BROKER"])
    defaults = KafkaSettings()
    consumed = {
        defaults.chat_topic,
        defaults.session_closed_topic,
        defaults.queries_topic,
        defaults.retry_topic,
        defaults.subagent_topic,
    }
    assert spec["triggers"]
    for trigger in spec["triggers"]:
        assert trigger["type"] == "kafka"
        meta = trigger["metadata"]
        assert meta["bootstrapServers"] == broker.netloc
        # the query consumer has a group of its own (MEMSTREAM_QUERY__GROUP_ID unset)
        group = config["MEMSTREAM_KAFKA__APP_ID"]
        if meta["topic"] == defaults.queries_topic:
            group += "-query"
        assert meta["consumerGroup"] == group
        assert meta["topic"] in consumed
        assert meta["allowIdleConsumers"] == "false"
        assert int(meta["lagThreshold"]) > 0
    # with no surge pod a rolling update never runs more workers than partitions
    assert deploy["spec"]["strategy"]["rollingUpdate"]["maxSurge"] == 0


def test_prometheusrule_carries_the_alerting_rules() -> None:
    rule = by_kind("PrometheusRule")
    alerts = yaml.safe_load((PROM / "alerts.yml").read_text())
    assert rule["spec"]["groups"] == alerts["groups"], (
        "k8s/prometheusrule.yaml differs from deploy/prometheus/alerts.yml: copy the groups over"
    )


# =================================================================== Prometheus
@pytest.fixture(scope="session")
def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool not found: install Debian's prometheus package"
    return path


def test_promtool_check_rules(promtool: str) -> None:
    r = run([promtool, "check", "rules", str(PROM / "alerts.yml")])
    assert r.returncode == 0, r.stdout + r.stderr


def test_promtool_test_rules(promtool: str) -> None:
    r = run([promtool, "test", "rules", str(PROM / "alerts.test.yml")], cwd=PROM)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS" in r.stdout


def test_promtool_check_config(promtool: str) -> None:
    r = run([promtool, "check", "config", str(PROM / "prometheus.yml")])
    assert r.returncode == 0, r.stdout + r.stderr


def test_promtool_test_rules_catches_a_wrong_expectation(promtool: str, tmp_path: Path) -> None:
    tests = yaml.safe_load((PROM / "alerts.test.yml").read_text())
    case = next(t for t in tests["tests"] if any(a["exp_alerts"] for a in t["alert_rule_test"]))
    check = next(a for a in case["alert_rule_test"] if a["exp_alerts"])
    check["exp_alerts"] = []
    shutil.copy(PROM / "alerts.yml", tmp_path / "alerts.yml")
    (tmp_path / "alerts.test.yml").write_text(yaml.safe_dump({**tests, "tests": [case]}))
    r = run([promtool, "test", "rules", "alerts.test.yml"], cwd=tmp_path)
    assert r.returncode != 0


def alert_rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load((PROM / "alerts.yml").read_text())
    return [r for g in doc["groups"] for r in g["rules"] if "alert" in r]


def test_every_alert_has_firing_and_quiet_unit_tests() -> None:
    tests = yaml.safe_load((PROM / "alerts.test.yml").read_text())
    assert tests["rule_files"] == ["alerts.yml"]
    fires: set[str] = set()
    quiet: set[str] = set()
    for case in tests["tests"]:
        for check in case.get("alert_rule_test", []):
            (fires if check.get("exp_alerts") else quiet).add(check["alertname"])
    names = {r["alert"] for r in alert_rules()}
    assert names >= {
        "MemstreamConsumerLagGrowing",
        "MemstreamConsumerStuck",
        "MemstreamDeadLettersIncreasing",
        "MemstreamProviderFailureRatioHigh",
        "MemstreamQueryLatencyP99High",
        "MemstreamWorkerDown",
    }
    assert names - fires == set(), f"no test where these fire: {names - fires}"
    assert names - quiet == set(), f"no test where these stay quiet: {names - quiet}"


def test_alert_rules_state_their_objectives() -> None:
    rules = {r["alert"]: r for r in alert_rules()}
    assert "memstream_query_seconds_bucket" in rules["MemstreamQueryLatencyP99High"]["expr"]
    assert re.search(
        r"histogram_quantile\(0\.99,.*\)\s*>\s*0\.06\b",
        rules["MemstreamQueryLatencyP99High"]["expr"],
        re.S,
    )
    ratio = rules["MemstreamProviderFailureRatioHigh"]["expr"]
    assert (
        "memstream_provider_failures_total" in ratio
        and "memstream_provider_requests_total" in ratio
    )
    assert re.search(r">\s*0\.05\s*$", ratio.strip())
    stuck = rules["MemstreamConsumerStuck"]["expr"]
    assert (
        "memstream_stage_last_progress_timestamp_seconds" in stuck
        and "memstream_stage_lag" in stuck
    )
    assert re.search(r"\)\s*>\s*(\d+)", stuck).group(1) == str(  # type: ignore[union-attr]
        int(HealthSettings().stall_timeout_s))
    assert "memstream_dead_letters_total" in rules["MemstreamDeadLettersIncreasing"]["expr"]
    assert rules["MemstreamWorkerDown"]["expr"].replace(" ", "") == 'up{job="memstream"}==0'
    for r in rules.values():
        assert r["labels"]["severity"] in {"warning", "critical"}
        assert {"summary", "description", "runbook"} <= set(r["annotations"])


# ==================================================================== dashboards
# Grafana's own variables, replaced by a value of the right type before parsing
GRAFANA_VARS = {"$__rate_interval": "1m", "$__interval": "1m", "$__range": "1h", "$bucket": "1h"}


def dashboards() -> dict[str, dict[str, Any]]:
    return {p.name: json.loads(p.read_text()) for p in sorted(DASHBOARDS.glob("*.json"))}


def panels(dash: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for p in dash["panels"]:
        yield p
        yield from p.get("panels", [])


def dashboard_exprs() -> list[tuple[str, str, str]]:
    out = []
    for name, dash in dashboards().items():
        for p in panels(dash):
            for t in p.get("targets", []):
                if "expr" in t:
                    out.append((name, p["title"], t["expr"]))
    return out


def all_exprs() -> list[tuple[str, str]]:
    exprs = [(f"{n} / {title}", e) for n, title, e in dashboard_exprs()]
    exprs += [(f"alerts.yml / {r['alert']}", r["expr"]) for r in alert_rules()]
    return exprs


def concrete(expr: str) -> str:
    for var, value in GRAFANA_VARS.items():
        expr = expr.replace(var, value)
    assert "$" not in expr, f"unknown Grafana variable in {expr!r}"
    return expr


def promtool_check_exprs(
    promtool: str, exprs: list[tuple[str, str]], tmp: Path
) -> subprocess.CompletedProcess[str]:
    rules = [
        {"record": f"memstream_check:expr_{i}", "expr": concrete(e)}
        for i, (_, e) in enumerate(exprs)
    ]
    path = tmp / "exprs.rules.yml"
    path.write_text(
        yaml.safe_dump({"groups": [{"name": "every_promql_expression", "rules": rules}]})
    )
    return run([promtool, "check", "rules", str(path)])


def test_every_promql_expression_parses(promtool: str, tmp_path: Path) -> None:
    exprs = all_exprs()
    assert len(dashboard_exprs()) >= 40
    r = promtool_check_exprs(promtool, exprs, tmp_path)
    if r.returncode != 0:
        index = "\n".join(f"expr_{i}: {where}: {e}" for i, (where, e) in enumerate(exprs))
        pytest.fail(f"promtool rejected an expression:\n{r.stdout}{r.stderr}\n{index}")
    assert f"SUCCESS: {len(exprs)} rules found" in r.stdout


def test_promql_check_catches_a_broken_expression(promtool: str, tmp_path: Path) -> None:
    r = promtool_check_exprs(
        promtool, [("broken", "sum by (le (rate(memstream_query_seconds_bucket[1m]))")], tmp_path
    )
    assert r.returncode != 0


def metric_catalog_labels() -> dict[str, set[str]]:
    """Every series name the catalog exposes, with its labels."""
    out: dict[str, set[str]] = {}
    for obj in vars(metric_catalog).values():
        if not isinstance(obj, Counter | Gauge | Histogram):
            continue
        labels = set(obj._labelnames)
        name = obj._name
        if isinstance(obj, Counter):
            out[f"{name}_total"] = labels
        elif isinstance(obj, Histogram):
            out[f"{name}_bucket"] = labels | {"le"}
            out[f"{name}_sum"] = labels
            out[f"{name}_count"] = labels
        else:
            out[name] = labels
    return out


PROMQL_WORDS = {
    "sum",
    "max",
    "min",
    "avg",
    "count",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "offset",
    "rate",
    "increase",
    "irate",
    "deriv",
    "delta",
    "histogram_quantile",
    "time",
    "absent",
    "topk",
    "bottomk",
    "max_over_time",
    "min_over_time",
    "avg_over_time",
    "bool",
    "clamp_min",
    "clamp_max",
    "label_replace",
    "vector",
    "scalar",
    "abs",
    "ceil",
    "floor",
    "round",
}
# series that are not memstream's own: Prometheus' target health and alert state
OTHER_SERIES = {
    "up": {"job", "instance"},
    "ALERTS": {"alertname", "alertstate", "severity", "job", "instance"},
}
TARGET_LABELS = {"job", "instance"}
UNBOUNDED = ("agent", "user", "conversation", "tenant", "message", "cube", "session_id", "event")
# the model-usage metrics label a tenant and an agent only when the settings name them,
# all others are `other` (streams/model_usage/rules.py): bounded, so they may be grouped by
SETTINGS_BOUNDED = {"tenant", "agent"}


def test_promql_names_only_catalog_metrics_and_labels() -> None:
    catalog = {**metric_catalog_labels(), **OTHER_SERIES}
    assert len(catalog) > 20
    for where, expr in all_exprs():
        text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', concrete(expr))  # drop string literals
        text = re.sub(r"\[[^\]]*\]", "", text)  # and range selectors
        grouping = {
            lbl.strip()
            for grp in re.findall(r"\b(?:by|on|without|ignoring)\s*\(([^)]*)\)", text)
            for lbl in grp.split(",")
            if lbl.strip()
        }
        matchers = set(
            re.findall(r"(\w+)\s*(?:=~|!~|!=|=)\s*\"", re.sub(r"\[[^\]]*\]", "", concrete(expr)))
        )
        text = re.sub(r"\b(?:by|on|without|ignoring)\s*\([^)]*\)", "", text)
        text = re.sub(r"\{[^}]*\}", "", text)
        names = {
            w
            for w in re.findall(r"\b[A-Za-z_][A-Za-z0-9_:]*\b", text)
            if w not in PROMQL_WORDS and not re.fullmatch(r"\d[\w.]*|e\d+|Inf|NaN", w)
        }
        unknown = names - set(catalog)
        assert not unknown, f"{where}: not in streams/metrics.py: {sorted(unknown)} ({expr})"
        labels = set().union(*(catalog[n] for n in names)) | TARGET_LABELS
        stray = sorted((grouping | matchers) - labels)
        assert not stray, f"{where}: {stray} are no labels of {sorted(names)}"
        model_usage = all(n.startswith("memstream_model_") for n in names)
        for label in grouping | matchers:
            if model_usage and label in SETTINGS_BOUNDED:
                continue
            assert not label.startswith(UNBOUNDED), f"{where}: unbounded label {label}"


def test_dashboards_are_provisionable() -> None:
    dashes = dashboards()
    assert len(dashes) >= 5
    uids = [d["uid"] for d in dashes.values()]
    assert len(set(uids)) == len(uids)
    for name, dash in dashes.items():
        assert dash["title"].startswith("memstream / ") and "memstream" in dash["tags"], name
        assert dash["editable"] is False  # the JSON files are the source
        variables = {v["name"]: v for v in dash["templating"]["list"]}
        ids = [p["id"] for p in panels(dash)]
        assert len(ids) == len(set(ids)), f"{name}: duplicate panel ids"
        for p in panels(dash):
            g = p["gridPos"]
            assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24 and g["h"] > 0, (
                name,
                p["title"],
            )
            for t in p.get("targets", []):
                ds = t.get("datasource") or p.get("datasource")
                if "expr" in t:
                    # never a fixed datasource: ${datasource} picks any Prometheus
                    assert ds == {"type": "prometheus", "uid": "${datasource}"}, (name, p["title"])
                    assert variables["datasource"]["type"] == "datasource"
                    assert variables["datasource"]["query"] == "prometheus"
                else:
                    assert ds == {"type": "yesoreyeram-infinity-datasource", "uid": "${stats}"}, (
                        name,
                        p["title"],
                    )
                    assert variables["stats"]["query"] == "yesoreyeram-infinity-datasource"
                    assert t["url"].startswith(STATS_ENDPOINTS), t["url"]
                    assert "tenant=$tenant" in t["url"], "the stats API is tenant-scoped"
            if p["type"] not in {"row", "text"}:
                assert p.get("targets"), (name, p["title"])
                assert p.get("description") is not None


def test_dashboards_answer_the_operators_questions() -> None:
    dashes = dashboards()

    def exprs_of(name: str) -> str:
        return "\n".join(
            t.get("expr", "") for p in panels(dashes[name]) for t in p.get("targets", [])
        )

    overview = exprs_of("memstream-overview.json")
    for metric in (
        "memstream_ingest_events_total",
        "memstream_consumer_lag",
        "memstream_dead_letters_total",
        "memstream_sessions_open",
        "memstream_consolidations_total",
        "memstream_query_seconds_bucket",
        'up{job="memstream"}',
    ):
        assert metric in overview, metric
    assert "histogram_quantile(0.5, sum by (le) (rate(memstream_query_seconds_bucket" in overview
    assert "histogram_quantile(0.99, sum by (le) (rate(memstream_query_seconds_bucket" in overview
    assert re.search(
        r"sum by \(type\) \(increase\(memstream_memories_stored_total\[\$__range\]\)\)",
        exprs_of("memstream-memory-types.json"),
    )
    assert "increase(memstream_ingest_events_total[$bucket])" in exprs_of("memstream-trends.json")
    search = exprs_of("memstream-search.json")
    for metric in (
        "memstream_query_seconds",
        "memstream_query_stage_seconds",
        "memstream_query_memories",
        "memstream_query_budget_tokens",
        "memstream_query_replies_total",
    ):
        assert metric in search, metric
    urls = [t["url"] for p in panels(dashes["memstream-stats.json"]) for t in p.get("targets", [])]
    for endpoint in STATS_ENDPOINTS:
        assert any(u.startswith(endpoint) for u in urls), endpoint


# ===================================================================== the docs
def github_anchor(heading: str) -> str:
    anchor = heading.strip().lower()
    anchor = re.sub(r"[^\w\- ]", "", anchor)
    return anchor.replace(" ", "-")


def test_operations_doc_has_a_runbook_for_every_alert() -> None:
    text = OPERATIONS_DOC.read_text()
    anchors = {github_anchor(h) for h in re.findall(r"^#+\s+(.+)$", text, re.M)}
    for rule in alert_rules():
        runbook = rule["annotations"]["runbook"]
        path, _, anchor = runbook.partition("#")
        assert (ROOT / path).resolve() == OPERATIONS_DOC.resolve()
        assert anchor in anchors, f"docs/operations.md has no section #{anchor} for {rule['alert']}"


# ====================================================================== tracing
@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_the_tracing_example_validates_and_fits_the_worker(version: str) -> None:
    """k8s/tracing/: every manifest it lists validates, and its Service is where the
    ConfigMap's commented OTLP endpoint points."""
    tracing = K8S / "tracing"
    kust = yaml.safe_load((tracing / "kustomization.yaml").read_text())
    assert set(kust["resources"]) == {p.name for p in tracing.glob("*.yaml")} - {
        "kustomization.yaml"}
    docs = [d for name in kust["resources"] for d in load_yaml_docs(tracing / name)]
    for doc in docs:
        validate_k8s(doc, version)
    [service] = [d for d in docs if d["kind"] == "Service"]
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    endpoint = re.search(r'OTEL_EXPORTER_OTLP_ENDPOINT: "([^"]+)"',
                         (K8S / "configmap.yaml").read_text())
    assert endpoint is not None
    url = urlsplit(endpoint.group(1))
    assert url.hostname == f"{service['metadata']['name']}.{kust['namespace']}.svc.cluster.local"
    assert url.port == ports["otlp-http"]


@COMPOSE_TIMEOUT
def test_compose_tracing_profile(compose_bin: Path) -> None:
    """With the tracing profile, Jaeger runs health-checked beside the worker, and the
    worker exports to it once MEMSTREAM_COMPOSE_OTLP_ENDPOINT names it; without it,
    the worker's endpoint is empty (tracing off)."""
    argv = [str(compose_bin), "--project-directory", str(ROOT), "-f", str(COMPOSE_FILE),
            "--profile", "tracing", "config", "--format", "json"]
    env = {**compose_env(), "MEMSTREAM_COMPOSE_OTLP_ENDPOINT": "http://jaeger:4318"}
    r = run(argv, cwd=ROOT, env=env)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr
    services = json.loads(r.stdout)["services"]
    jaeger = services["jaeger"]
    assert jaeger["healthcheck"]["test"]
    assert {p["target"] for p in jaeger["ports"]} == {16686}
    worker_env = services["worker"]["environment"]
    assert worker_env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger:4318"
    plain = run([*argv[:-5], "config", "--format", "json"], cwd=ROOT, env=compose_env())
    assert json.loads(plain.stdout)["services"]["worker"]["environment"][
        "OTEL_EXPORTER_OTLP_ENDPOINT"] == ""
