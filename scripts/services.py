#!/usr/bin/env python3
"""Start, stop and check the local services memstream's tests run against.

    python3 scripts/services.py up [kafka redis mariadb prometheus postgres fake-openai memos mem0
                                    jaeger]
    python3 scripts/services.py down [...]
    python3 scripts/services.py status
    python3 scripts/services.py jars     # the Kafka jars into the cache, once
    python3 scripts/services.py venvs    # the MemOS and Mem0 environments, once

Every service runs on loopback, keeps its data, log and pid file under
``.services/<name>/`` and is stopped by that pid only. ``up`` is idempotent: a
service whose pid is alive and whose port answers is left alone. Kafka runs in
KRaft mode from the ``org.apache.kafka:kafka_2.13`` jars on Maven Central; the
jars are cached in ``$MEMSTREAM_CACHE`` (default ``~/.cache/memstream``) so a
second start does not download again. Only the standard library is used, so
this runs before any virtual environment exists.

Before ``up``, ``jars`` or ``venvs`` does anything, every program the named
services (and the services they start first) would execute is looked for; if
one is missing, nothing is started, stopped or fetched: the missing programs,
the Debian package of each and the command that installs them (``make setup``,
which is ``scripts/setup.sh``) are printed to stderr and the exit status is 1.
Daemons are looked for on ``PATH`` and then in ``/usr/sbin`` and ``/sbin``,
where Debian puts them off an ordinary user's ``PATH``, and started by the path
found. A later failure -- a program that exits non-zero (Maven offline, pip), a
directory that cannot be made or written (the cache) -- is one ``[services]``
message on stderr too, with the failing command and the tail of its output,
and the exit status 1; no traceback. Usage errors go to stderr (status 2).

``up`` and ``down`` hold a lock of each service while they start or stop it
(``.services/<name>.lock``, and those of the services it starts first), so two
of them at once (tests of a parallel run starting the MemOS server each) start
a service once: the second waits, then finds it running. A service that
shares none of those locks is not held up (Jaeger waiting for its build does
not hold up MemOS; Mem0 waits while MemOS starts the PostgreSQL both use).
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE = Path(os.environ.get("MEMSTREAM_SERVICES_DIR", ROOT / ".services"))

# the Kafka parts are shared with `memstream demo` (standard library only)
sys.path.insert(0, str(ROOT))
from streams.devtools import embedded_broker as broker  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))
import provider_services as ps  # noqa: E402

CACHE, KAFKA_VERSION = broker.CACHE, broker.KAFKA_VERSION

PORTS = {
    "kafka": int(os.environ.get("MEMSTREAM_TEST_KAFKA_PORT", "19092")),
    "kafka-controller": int(os.environ.get("MEMSTREAM_TEST_KAFKA_CONTROLLER_PORT", "19093")),
    "redis": int(os.environ.get("MEMSTREAM_TEST_REDIS_PORT", "16379")),
    "mariadb": int(os.environ.get("MEMSTREAM_TEST_MYSQL_PORT", "13306")),
    "prometheus": int(os.environ.get("MEMSTREAM_TEST_PROMETHEUS_PORT", "19090")),
    "postgres": int(os.environ.get("MEMSTREAM_TEST_POSTGRES_PORT", "15432")),
    "fake-openai": int(os.environ.get("MEMSTREAM_TEST_FAKE_OPENAI_PORT", "18100")),
    "memos": int(os.environ.get("MEMSTREAM_TEST_MEMOS_PORT", "18001")),
    "mem0": int(os.environ.get("MEMSTREAM_TEST_MEM0_PORT", "18002")),
    "jaeger": int(os.environ.get("MEMSTREAM_TEST_JAEGER_PORT", "16687")),  # its query API
    "jaeger-otlp": int(os.environ.get("MEMSTREAM_TEST_JAEGER_OTLP_PORT", "14318")),
}
ALL = ["kafka", "redis", "mariadb"]
OPTIONAL = ["prometheus", "postgres", "fake-openai", "memos", "mem0", "jaeger"]

# ------------------------------------------------------- what each one runs
# the programs each service executes (Kafka's java is run from PATH by the code
# shared with `memstream demo`; the others by the path `program` finds)
PROGRAMS = {
    "kafka": ["java"],
    "redis": ["redis-server"],
    "mariadb": ["mariadb-install-db", "mariadbd", "mariadb"],
    "prometheus": ["prometheus"],
}
FROM_PATH_ONLY = {"java", "mvn"}
# the services each one starts first
STARTS_FIRST = {"memos": ["fake-openai", "postgres"], "mem0": ["fake-openai", "postgres"]}
# where each program comes from on Debian
PACKAGES = {
    "java": "openjdk-17-jdk-headless", "mvn": "maven", "redis-server": "redis-server",
    "mariadb-install-db": "mariadb-server", "mariadbd": "mariadb-server",
    "mariadb": "mariadb-client", "prometheus": "prometheus", "setpriv": "util-linux",
    "useradd": "passwd",
}
SBIN = ("/usr/sbin", "/sbin")
SETUP = "make setup (or: bash scripts/setup.sh)"


def log(msg: str) -> None:
    print(f"[services] {msg}", flush=True)


def program(name: str) -> str | None:
    """The path of the program ``name``: on PATH, else (a daemon) in /usr/sbin or /sbin."""
    found = shutil.which(name)
    if found is None and name not in FROM_PATH_ONLY:
        found = shutil.which(name, path=os.pathsep.join(SBIN))
    return found


def run_path(name: str) -> str:
    """What to execute for ``name``: the path found, else the bare name (checked before)."""
    return program(name) or name


def with_first(names: list[str]) -> list[str]:
    """``names`` and the services they start first, each once."""
    out: list[str] = []
    for n in names:
        out += [*STARTS_FIRST.get(n, []), n]
    return list(dict.fromkeys(out))


def jars_cached() -> bool:
    return (CACHE / f"kafka-{KAFKA_VERSION}" / "lib" / ".complete").exists()


def pg_user_exists() -> bool:
    try:
        pwd.getpwnam(ps.PG_USER)
    except KeyError:
        return False
    return True


def missing(cmd: str, names: list[str]) -> list[tuple[str, str | None]]:
    """What ``cmd`` on the services ``names`` needs and this machine lacks: one
    ``(what, Debian package or None)`` each; empty when all is there. Looks only."""
    wanted = with_first(names) if cmd == "up" else []
    programs = [p for n in wanted for p in PROGRAMS.get(n, [])]
    if (cmd == "jars" or "kafka" in wanted) and not jars_cached():
        programs.append("mvn")  # once, to fetch the Kafka jars
    if "postgres" in wanted and os.geteuid() == 0:  # PostgreSQL runs as a user of its own
        programs += ["setpriv"] if pg_user_exists() else ["setpriv", "useradd"]
    lacking: list[tuple[str, str | None]] = [
        (f"{p} is not installed (Debian package {PACKAGES[p]})", PACKAGES[p])
        for p in dict.fromkeys(programs) if program(p) is None]
    if "fake-openai" in wanted and not (ROOT / ".venv" / "bin" / "python").exists():
        lacking.append(("the project's virtual environment .venv does not exist", None))
    if (cmd == "venvs" or "postgres" in wanted) and importlib.util.find_spec("ensurepip") is None:
        lacking.append((f"{sys.executable} cannot create virtual environments "
                        "(Debian package python3-venv)", "python3-venv"))
    return lacking


ACTION = {"up": "start", "jars": "fetch the Kafka jars", "venvs": "build the provider venvs",
          "down": "stop", "status": "read the status of"}
UNDONE = {"up": "nothing was started or stopped", "jars": "nothing was downloaded",
          "venvs": "nothing was installed"}


def report_missing(cmd: str, names: list[str], lacking: list[tuple[str, str | None]]) -> None:
    """The one message for what is missing: what, from which package, how to get it."""
    packages = sorted({pkg for _, pkg in lacking if pkg})
    out = [f"[services] cannot {ACTION[cmd]} {' '.join(names)}".rstrip()
           + f": this machine lacks what it needs; {UNDONE[cmd]}."]
    out += [f"[services]   {what}" for what, _ in lacking]
    out.append(f"[services] {SETUP} installs what is missing"
               + (f"; the packages alone: sudo apt-get install {' '.join(packages)}"
                  if packages else ""))
    print("\n".join(out), file=sys.stderr, flush=True)


TAIL_LINES = 20


def failure(exc: BaseException) -> str:
    """What went wrong, for one message: the failing command, its exit status and the
    tail of its output (when it was kept), or the error of a file operation."""
    if isinstance(exc, subprocess.CalledProcessError):
        cmd = exc.cmd if isinstance(exc.cmd, str) else shlex.join(map(str, exc.cmd))
        out = b"".join(o if isinstance(o, bytes) else str(o).encode()
                       for o in (exc.output, exc.stderr) if o)
        tail = [line for line in out.decode(errors="replace").splitlines() if line.strip()]
        said = "".join(f"\n[services]     {line}" for line in tail[-TAIL_LINES:])
        return f"`{cmd}` exited with status {exc.returncode}" + (
            f"; the end of its output:{said}" if said else " (its errors, if any, are above)")
    if isinstance(exc, OSError) and exc.filename is not None:
        path = Path(os.fsdecode(exc.filename))
        if path == CACHE or path in CACHE.parents or CACHE in path.parents:
            return f"{exc} (the cache directory is {CACHE}: MEMSTREAM_CACHE sets it)"
    return str(exc)


@contextlib.contextmanager
def stdout_kept() -> Iterator[None]:
    """What is written to stdout inside (by this process and the programs it runs) is
    held in a file and, when a program fails, put in its error as its output:
    ``mvn -q`` writes its errors to stdout, which the setup does not show."""
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 1)
        try:
            yield
        except subprocess.CalledProcessError as exc:
            sys.stdout.flush()
            held.seek(0)
            exc.output = held.read()
            raise
        finally:
            os.dup2(saved, 1)
            os.close(saved)


def fetch_jars() -> Path:
    """The Kafka jars, fetched once with Maven (Maven's errors kept for the message)."""
    with stdout_kept():
        return broker.kafka_jars(quiet=False)


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


def spawn(name: str, argv: list[str], env: dict[str, str] | None = None,
          cwd: Path | None = None) -> int:
    d = STATE / name
    d.mkdir(parents=True, exist_ok=True)
    out = open(d / "stdout.log", "ab")  # noqa: SIM115 (the child's, kept open by it)
    proc = subprocess.Popen(
        argv,
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **(env or {})},
        cwd=cwd,
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
def kafka_up() -> None:
    port, cport = PORTS["kafka"], PORTS["kafka-controller"]
    if pid_of("kafka") and port_open(port):
        log(f"kafka already running on 127.0.0.1:{port}")
        return
    d = STATE / "kafka"
    if not (CACHE / f"kafka-{KAFKA_VERSION}" / "lib" / ".complete").exists():
        log(f"fetching Kafka {KAFKA_VERSION} jars from Maven Central into {CACHE}")
        fetch_jars()
    argv = broker.kafka_command(d, port, cport)
    # the log is appended to across restarts: start from an empty one
    (d / "server.log").unlink(missing_ok=True)
    spawn("kafka", argv)
    log(f"kafka starting on 127.0.0.1:{port}")
    wait_until("kafka", lambda: broker.kafka_ready(d, port), 120)
    log(f"kafka up on 127.0.0.1:{port}")


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
            run_path("redis-server"), "--port", str(port), "--bind", "127.0.0.1",
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
                run_path("mariadb-install-db"), f"--datadir={data}", f"--user={user}",
                "--auth-root-authentication-method=normal", "--skip-test-db",
                "--no-defaults",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    spawn(
        "mariadb",
        [
            run_path("mariadbd"), "--no-defaults", f"--datadir={data}", f"--socket={sock}",
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
            [run_path("mariadb"), f"--socket={sock}", "-uroot", "-e", "SELECT 1"],
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
    subprocess.run([run_path("mariadb"), f"--socket={sock}", "-uroot", "-e", sql], check=True)
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
            run_path("prometheus"), f"--config.file={config}", f"--storage.tsdb.path={d / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}", "--web.enable-lifecycle",
        ],
    )
    wait_until("prometheus", lambda: port_open(port), 60)
    log(f"prometheus up on 127.0.0.1:{port}")


# -------------------------------------------------------------------- jaeger
JAEGER_CONFIG = """\
service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: memory
    http:
      endpoint: 127.0.0.1:{query}
    grpc:
      endpoint: 127.0.0.1:{query_grpc}
  jaeger_storage:
    backends:
      memory:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{otlp}
exporters:
  jaeger_storage_exporter:
    trace_storage: memory
"""


def jaeger_up() -> None:
    """Jaeger v2, in memory: OTLP over HTTP in, the query API out (built once from
    the Go module proxy by scripts/install-jaeger.sh, or waited for when setup's
    background build is under way)."""
    port, otlp = PORTS["jaeger"], PORTS["jaeger-otlp"]
    if pid_of("jaeger") and port_open(port) and port_open(otlp):
        log(f"jaeger already running: query API 127.0.0.1:{port}, OTLP/HTTP 127.0.0.1:{otlp}")
        return
    binary = subprocess.run(["bash", str(ROOT / "scripts" / "install-jaeger.sh")], check=True,
                            stdout=subprocess.PIPE, text=True).stdout.strip()
    d = STATE / "jaeger"
    d.mkdir(parents=True, exist_ok=True)
    config = d / "config.yaml"
    config.write_text(JAEGER_CONFIG.format(query=port, query_grpc=port + 1, otlp=otlp))
    spawn("jaeger", [binary, "--config", str(config)])
    wait_until("jaeger", lambda: port_open(port) and port_open(otlp), 60)
    log(f"jaeger up: query API 127.0.0.1:{port}, OTLP/HTTP 127.0.0.1:{otlp}")


# ------------------------------------------------- the real memory providers
def providers() -> ps.Services:
    return ps.Services(STATE, CACHE, PORTS, spawn=spawn, wait_until=wait_until,
                       port_open=port_open, pid_of=pid_of, log=log)


def fake_openai_up() -> None:
    """The project's OpenAI-compatible fake (LLM and embeddings of the real providers)."""
    port = PORTS["fake-openai"]
    if pid_of("fake-openai") and port_open(port):
        log(f"fake-openai already running on 127.0.0.1:{port}")
        return
    python = ROOT / ".venv" / "bin" / "python"
    if not python.exists():
        raise SystemExit("fake-openai runs in the project's virtual environment: make venv")
    spawn("fake-openai", [str(python), "-m", "tests.fakes.openai", "--host", "127.0.0.1",
                          "--port", str(port), "--dim", str(ps.EMBED_DIM)], cwd=ROOT)
    wait_until("fake-openai", lambda: port_open(port), 30)
    log(f"fake-openai up on 127.0.0.1:{port}")


# ---------------------------------------------------------------------- down
STOP_SIGNAL = {"postgres": signal.SIGINT}


def down(name: str) -> None:
    pid = pid_of(name)
    if pid is None:
        log(f"{name} not running")
        (STATE / name / "pid").unlink(missing_ok=True)
        return
    # postgres' SIGTERM waits for its clients to leave; SIGINT is its fast shutdown
    os.kill(pid, STOP_SIGNAL.get(name, signal.SIGTERM))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and pid_of(name) is not None:
        time.sleep(0.2)
    if pid_of(name) is not None:
        os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
    (STATE / name / "pid").unlink(missing_ok=True)
    log(f"{name} stopped (pid {pid})")


UP = {"kafka": kafka_up, "redis": redis_up, "mariadb": mariadb_up, "prometheus": prometheus_up,
      "jaeger": jaeger_up,
      "fake-openai": fake_openai_up, "postgres": lambda: ps.postgres_up(providers()),
      "memos": lambda: ps.memos_up(providers(), fake_openai_up),
      "mem0": lambda: ps.mem0_up(providers(), fake_openai_up)}


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if not argv or argv[0] not in ACTION:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, names = argv[0], argv[1:] or ALL
    if cmd in {"jars", "venvs", "status"} and argv[1:]:
        print(f"services.py {cmd} takes no service names (given: {' '.join(argv[1:])})",
              file=sys.stderr)
        return 2
    unknown = [n for n in names if n not in UP]
    if unknown:
        print(f"unknown service(s): {', '.join(unknown)}; known: {', '.join(UP)}",
              file=sys.stderr)
        return 2
    if cmd in UNDONE:
        lacking = missing(cmd, names)
        if lacking:
            report_missing(cmd, names if cmd == "up" else [], lacking)
            return 1
    try:
        return run(cmd, names, argv[1:])
    except (OSError, subprocess.CalledProcessError, broker.BrokerUnavailableError) as exc:
        what = f"{ACTION[cmd]} {' '.join(names)}" if cmd in {"up", "down"} else ACTION[cmd]
        print(f"[services] cannot {what}: {failure(exc)}", file=sys.stderr, flush=True)
        return 1


@contextlib.contextmanager
def one_at_a_time(name: str) -> Iterator[None]:
    """Exclusive locks on ``STATE/<name>.lock`` and on those of the services ``name``
    starts first, taken in name order (two callers never wait for each other's)."""
    STATE.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as held:
        for n in sorted({name, *STARTS_FIRST.get(name, [])}):
            f = held.enter_context(open(STATE / f"{n}.lock", "a"))
            fcntl.flock(f, fcntl.LOCK_EX)  # released when the file is closed
        yield


def run(cmd: str, names: list[str], given: list[str]) -> int:
    if cmd == "jars":
        print(fetch_jars())
    elif cmd == "venvs":
        print(ps.memos_venv(providers()))
        print(ps.mem0_venv(providers()))
    elif cmd == "up":
        for n in names:
            with one_at_a_time(n):
                UP[n]()
    elif cmd == "down":
        for n in reversed(names if given else ALL + OPTIONAL):
            with one_at_a_time(n):
                down(n)
    else:
        for n in ALL + OPTIONAL:
            pid = pid_of(n)
            state = f"pid {pid}" if pid else "stopped"
            is_open = "open" if port_open(PORTS[n]) else "closed"
            print(f"{n:<11} {state:<12} port {PORTS[n]} {is_open}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
