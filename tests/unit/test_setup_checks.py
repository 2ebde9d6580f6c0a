"""What make test needs but the machine lacks gets one clear message, never a traceback.

``scripts/setup.sh`` (the first step of ``make test``), ``scripts/services.py``
and the Makefile's order of the two are run against a ``PATH`` built for each
test: a directory of links to everything on the real ``PATH`` but the programs
hidden, plus small stand-ins (a failing ``mvn`` or ``pip``, a broken ``go``, an
``id`` that says root, an ``apt-get`` that installs nothing). Each failure must
exit non-zero, say what is missing or failed and how to get it, print no
traceback, and leave everything as it was.

These tests live in ``tests/unit``, not ``tests/integration``: they need no
Kafka, Redis or MariaDB -- on a machine without them is where they matter --
and the integration tier's fixture requires the shared services running. They
use no event loop and start no service; ``make test-unit`` runs them, and so
does plain ``pytest``. Nothing real is touched: the cache
(``MEMSTREAM_CACHE``), the services' state directory and ports are the test's
own, a stand-in ``mvn`` that fails is on every ``PATH`` a full setup run gets
(so it never downloads), and ``apt-get`` and ``sudo`` are stand-ins wherever
setup might reach them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from streams.devtools.embedded_broker import free_port

ROOT = Path(__file__).resolve().parents[2]
BASH = shutil.which("bash") or "/bin/bash"
SETUP = [BASH, str(ROOT / "scripts" / "setup.sh")]
SERVICES = [sys.executable, str(ROOT / "scripts" / "services.py")]

# program hidden -> the Debian package the message must name
HIDDEN = {"redis-server": "redis-server", "java": "openjdk-17-jdk-headless"}

# the tests that need setup's step 1 to pass here run where it does (as under
# `make test`, whose setup passed first); elsewhere they are skipped
STEP_ONE = ["make", "git", "redis-server", "mariadbd", "mariadb-install-db", "mariadb",
            "prometheus", "promtool", "java", "javac", "mvn", "go"]
LACKING = [p for p in STEP_ONE if shutil.which(
    p, path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])) is None]
needs_step_one = pytest.mark.skipif(
    bool(LACKING), reason=f"this machine lacks {', '.join(LACKING)} (make setup installs them)")

# stand-ins: they record how they were called in $STUB_LOG
APT_GET = '#!/bin/sh\necho "apt-get $*" >> "$STUB_LOG"\nexit 0\n'
SUDO = '#!/bin/sh\necho "sudo $*" >> "$STUB_LOG"\nexit 1\n'
ROOT_ID = '#!/bin/sh\necho 0\n'
MAVEN_OFFLINE = (
    "#!/bin/sh\n"
    'echo "[ERROR] Failed to execute goal on project kafka-runtime: Could not resolve'
    ' dependencies: Unknown host repo.maven.apache.org"\n'
    "exit 1\n")
BROKEN_GO = '#!/bin/sh\necho "go: cannot find GOROOT directory: /stub" >&2\nexit 2\n'


def path_without(hidden: list[str], where: Path, stubs: dict[str, str]) -> str:
    """A PATH holding everything the real PATH holds but ``hidden``, and ``stubs``."""
    where.mkdir()
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        folder = Path(entry)
        if not folder.is_dir():
            continue
        for exe in folder.iterdir():
            link = where / exe.name
            if (exe.name in hidden or exe.name in stubs or link.is_symlink()
                    or not exe.is_file() or not os.access(exe, os.X_OK)):
                continue
            link.symlink_to(exe)
    for name, text in stubs.items():
        (where / name).write_text(text)
        (where / name).chmod(0o755)
    for program in hidden:
        # daemons are also looked for in /usr/sbin and /sbin
        assert shutil.which(program, path=os.pathsep.join([str(where), "/usr/sbin", "/sbin"])) \
            is None, f"{program} is in /usr/sbin or /sbin: it cannot be hidden"
    return str(where)


def run(argv: list[str], tmp: Path, *, hidden: Sequence[str] = (),
        stubs: dict[str, str] | None = None, path: str | None = None,
        **env: str) -> subprocess.CompletedProcess[str]:
    """``argv`` with the test's own PATH, cache, state directory and ports."""
    if path is None:
        path = path_without(list(hidden), tmp / "bin",
                            {"apt-get": APT_GET, "sudo": SUDO, "mvn": MAVEN_OFFLINE}
                            | (stubs or {}))
    ports = {f"MEMSTREAM_TEST_{name}_PORT": str(free_port()) for name in (
        "KAFKA", "KAFKA_CONTROLLER", "REDIS", "MYSQL", "PROMETHEUS", "POSTGRES",
        "FAKE_OPENAI", "MEMOS", "MEM0")}
    full = {**os.environ, **ports, "PATH": path, "MEMSTREAM_SETUP_NO_ROOT": "1",
            "MEMSTREAM_SERVICES_DIR": str(tmp / "services"), "PYTHON": sys.executable,
            "MEMSTREAM_CACHE": str(tmp / "cache"), "STUB_LOG": str(tmp / "stub.log"), **env}
    try:
        return subprocess.run(argv, cwd=ROOT, env=full, capture_output=True, text=True,
                              timeout=120)
    finally:
        stop_what_started(tmp / "services")


def stop_what_started(state: Path) -> None:
    """Should a service have been started after all, stop it by its pid (no other)."""
    for pid_file in state.glob("*/pid"):
        with contextlib.suppress(OSError, ValueError):
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)


def stub_calls(tmp: Path) -> str:
    log = tmp / "stub.log"
    return log.read_text() if log.exists() else ""


def assert_failed_clearly(r: subprocess.CompletedProcess[str], *said: str,
                          status: int = 1) -> None:
    out = r.stdout + r.stderr
    assert r.returncode == status, out
    assert "Traceback" not in out, out
    for text in said:
        assert text in r.stderr, out


def assert_clear(r: subprocess.CompletedProcess[str], program: str, package: str) -> None:
    assert_failed_clearly(r, program, package, "apt-get install", "make setup")


# ------------------------------------------------------------ missing programs
@pytest.mark.parametrize("program", list(HIDDEN))
def test_setup_names_the_missing_package_and_how_to_install_it(
        program: str, tmp_path: Path) -> None:
    r = run(SETUP, tmp_path, hidden=[program])
    assert_clear(r, program, HIDDEN[program])
    # it stopped before anything else: nothing fetched, built or installed
    assert "nothing was installed" in r.stderr
    assert "[setup] ready" not in r.stderr
    assert not stub_calls(tmp_path)
    # the check alone says the same, root or not
    check = run([*SETUP, "--check"], tmp_path, path=str(tmp_path / "bin"))
    assert_clear(check, program, HIDDEN[program])


@needs_step_one
def test_setup_check_passes_where_everything_is_installed(tmp_path: Path) -> None:
    r = run([*SETUP, "--check"], tmp_path, path=os.environ.get("PATH", ""))
    assert r.returncode == 0, r.stderr


def test_a_file_that_is_not_executable_is_not_a_program(tmp_path: Path) -> None:
    path = path_without(["redis-server"], tmp_path / "bin", {})
    (tmp_path / "bin" / "redis-server").write_text("not a program\n")  # mode 644
    r = run([*SETUP, "--check"], tmp_path, path=path)
    assert_clear(r, "redis-server", "redis-server")


def test_a_python_that_is_not_there_is_named_as_such(tmp_path: Path) -> None:
    r = run([*SETUP, "--check"], tmp_path, PYTHON="/nonexistent/python3")
    assert_failed_clearly(r, "PYTHON=/nonexistent/python3 is not an executable Python",
                          "set PYTHON")
    assert "python3-venv" not in r.stderr  # no package would make that path exist


# ------------------------------------------------------- a broken Go, the cache
@pytest.mark.parametrize("how", [
    pytest.param("GOROOT", marks=pytest.mark.skipif(shutil.which("go") is None,
                                                     reason="no go on PATH")),
    "stub"])
def test_setup_says_go_is_there_but_broken(how: str, tmp_path: Path) -> None:
    if how == "GOROOT":  # `make setup`, as a person runs it
        argv = ["make", "--no-print-directory", "-s", "setup", f"PYTHON={sys.executable}"]
        r = run(argv, tmp_path, GOROOT="/nonexistent")
        cause, status = "cannot find GOROOT directory: /nonexistent", 2  # make's own
    else:
        r = run(SETUP, tmp_path, stubs={"go": BROKEN_GO})
        cause, status = "cannot find GOROOT directory: /stub", 1
    assert_failed_clearly(r, "go is on PATH but `go env GOVERSION` fails", cause,
                          "nothing was installed", status=status)


def test_a_cache_that_cannot_be_written_is_said_once(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    cache = str(tmp_path / "a-file" / "cache")  # cannot be made, for root too
    r = run([*SETUP, "--check"], tmp_path, MEMSTREAM_CACHE=cache)
    assert_failed_clearly(r, f"the cache directory {cache} cannot be created or written",
                          "MEMSTREAM_CACHE")
    # services.py, run on its own, says it in one line too
    r = run([*SERVICES, "jars"], tmp_path, path=str(tmp_path / "bin"), MEMSTREAM_CACHE=cache)
    assert_failed_clearly(r, "[services] cannot fetch the Kafka jars", "Not a directory",
                          "MEMSTREAM_CACHE")


# ------------------------------------------------------ failures after step 1
@needs_step_one
def test_a_failing_maven_is_shown_without_a_traceback(tmp_path: Path) -> None:
    r = run(SETUP, tmp_path)  # the stand-in mvn is offline; the cache is empty
    assert_failed_clearly(r, "[services] cannot fetch the Kafka jars", "mvn -q",
                          "[ERROR] Failed to execute goal", "Unknown host repo.maven.apache.org")
    assert "[setup] ready" not in r.stderr
    assert not (tmp_path / "cache" / "bin").exists()  # step 3 never ran


def test_a_failing_pip_is_one_message(tmp_path: Path) -> None:
    pip = tmp_path / "cache" / "memos-venv" / "bin" / "pip"
    pip.parent.mkdir(parents=True)
    pip.write_text('#!/bin/sh\necho "ERROR: No matching distribution (offline)" >&2\nexit 1\n')
    pip.chmod(0o755)
    r = run([*SERVICES, "venvs"], tmp_path)
    assert_failed_clearly(r, "[services] cannot build the provider venvs", "pip install",
                          "exited with status 1", "ERROR: No matching distribution")


def test_maven_missing_for_the_jars_is_said_as_a_download(tmp_path: Path) -> None:
    path = path_without(["mvn"], tmp_path / "bin", {"apt-get": APT_GET, "sudo": SUDO})
    r = run([*SERVICES, "jars"], tmp_path, path=path)
    assert_failed_clearly(r, "mvn is not installed (Debian package maven)",
                          "nothing was downloaded")
    assert "started" not in r.stderr


# ----------------------------------------------------- who installs, and how
def test_root_checks_again_after_apt_get(tmp_path: Path) -> None:
    # root (a stand-in id) whose apt-get succeeds without installing anything
    r = run(SETUP, tmp_path, hidden=["redis-server"], stubs={"id": ROOT_ID},
            MEMSTREAM_SETUP_NO_ROOT="")
    assert "apt-get install" in stub_calls(tmp_path)
    assert "redis-server" in stub_calls(tmp_path)
    assert_failed_clearly(r, "apt-get install finished, but this machine still lacks",
                          "redis-server (Debian package redis-server)")
    assert "[setup] ready" not in r.stderr


def test_root_without_apt_get_is_told_which_packages(tmp_path: Path) -> None:
    path = path_without(["redis-server", "apt-get"], tmp_path / "bin",
                        {"id": ROOT_ID, "sudo": SUDO, "mvn": MAVEN_OFFLINE})
    r = run(SETUP, tmp_path, path=path, MEMSTREAM_SETUP_NO_ROOT="")
    assert_failed_clearly(r, "redis-server (Debian package redis-server)",
                          "apt-get is not available")
    assert "command not found" not in r.stderr


@pytest.mark.parametrize("value", ["true", "yes"])
def test_no_root_takes_true_and_yes(value: str, tmp_path: Path) -> None:
    r = run(SETUP, tmp_path, hidden=["redis-server"], stubs={"id": ROOT_ID},
            MEMSTREAM_SETUP_NO_ROOT=value)
    assert_failed_clearly(r, "nothing was installed", "sudo apt-get install")
    assert not stub_calls(tmp_path)


# ------------------------------------------------------------- the arguments
def test_setup_arguments(tmp_path: Path) -> None:
    r = run([*SETUP, "--check", "--foo"], tmp_path, path=os.environ.get("PATH", ""))
    assert r.returncode == 2 and "usage: bash scripts/setup.sh" in r.stderr, r.stderr
    r = run([*SETUP, "--help"], tmp_path, path=os.environ.get("PATH", ""))
    assert r.returncode == 0 and "bash scripts/setup.sh --check" in r.stdout, r.stderr


def test_services_usage_errors_go_to_stderr(tmp_path: Path) -> None:
    # a pip that fails at once: a names-ignoring `venvs` would not build for long
    pip = tmp_path / "cache" / "memos-venv" / "bin" / "pip"
    pip.parent.mkdir(parents=True)
    pip.write_text("#!/bin/sh\nexit 1\n")
    pip.chmod(0o755)
    path = os.environ.get("PATH", "")
    for argv, said in (([*SERVICES, "up", "nosuch"], "unknown service(s): nosuch"),
                       ([*SERVICES, "venvs", "redis"], "takes no service names"),
                       ([*SERVICES, "jars", "kafka"], "takes no service names"),
                       (SERVICES, "python3 scripts/services.py up")):
        r = run(argv, tmp_path, path=path)
        assert r.returncode == 2 and said in r.stderr and not r.stdout, (argv, r)
    assert not list((tmp_path / "services").glob("*/pid"))


# ---------------------------------------------------------- services.py up
# what `services.py up` is asked for: `make services` itself; and a service that
# comes before the one lacking its program, which must not be started either
@pytest.mark.parametrize(("program", "args"), [
    ("redis-server", ["up"]),
    ("java", ["up", "redis", "kafka"]),
])
def test_services_up_names_the_missing_program_and_starts_nothing(
        program: str, args: list[str], tmp_path: Path) -> None:
    r = run([*SERVICES, *args], tmp_path, hidden=[program])
    assert_clear(r, program, HIDDEN[program])
    assert "nothing was started" in r.stderr
    assert not list((tmp_path / "services").glob("*/pid")), "a service was started"


# ------------------------------------------------------- the Makefile's order
@pytest.mark.parametrize("target", ["test", "test-integration", "test-chaos"])
@pytest.mark.parametrize("flags", [["-k"], ["-j2"], ["-k", "-j2"]])
def test_make_starts_no_service_when_setup_fails(
        target: str, flags: list[str], tmp_path: Path) -> None:
    # the project's Makefile beside a setup that fails and a recording python:
    # nothing of the project's is run
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    (tmp_path / "scripts" / "setup.sh").write_text("echo 'setup failed' >&2\nexit 1\n")
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\necho "$*" >> {tmp_path / "calls"}\n')
    python.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL"}}
    r = subprocess.run(["make", "-C", str(tmp_path), *flags, target, f"PYTHON={python}",
                        f"VENV={tmp_path / 'venv'}"], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0 and "setup failed" in r.stderr, r.stdout + r.stderr
    calls = tmp_path / "calls"
    assert not calls.exists(), f"run after setup failed: {calls.read_text()}"
