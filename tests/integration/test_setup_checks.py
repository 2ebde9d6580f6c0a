"""A machine without a program the tests need gets one clear message, never a traceback.

``scripts/setup.sh`` (the first step of ``make test``) and
``scripts/services.py up`` are run with a ``PATH`` that lacks one program — a
directory of links to everything on the real ``PATH`` but that one — as a user
who may neither be root nor use sudo (``MEMSTREAM_SETUP_NO_ROOT=1``). Each must
exit non-zero, name the missing program, its Debian package and the command
that installs it, print no traceback, and leave everything as it was: the
setup installs nothing, and ``services.py`` starts nothing (its state
directory and ports are the test's own, so the shared services are never
touched either way).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.services import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
BASH = shutil.which("bash") or "/bin/bash"

# program hidden -> the Debian package the message must name
HIDDEN = {"redis-server": "redis-server", "java": "openjdk-17-jdk-headless"}


def path_without(program: str, where: Path) -> str:
    """A PATH holding everything the real PATH holds but ``program``."""
    where.mkdir()
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        folder = Path(entry)
        if not folder.is_dir():
            continue
        for exe in folder.iterdir():
            link = where / exe.name
            if (exe.name == program or link.is_symlink() or not exe.is_file()
                    or not os.access(exe, os.X_OK)):
                continue
            link.symlink_to(exe)
    assert shutil.which(program, path=str(where)) is None
    return str(where)


def run(argv: list[str], path: str, state: Path) -> subprocess.CompletedProcess[str]:
    ports = {f"MEMSTREAM_TEST_{name}_PORT": str(free_port()) for name in (
        "KAFKA", "KAFKA_CONTROLLER", "REDIS", "MYSQL", "PROMETHEUS", "POSTGRES",
        "FAKE_OPENAI", "MEMOS", "MEM0")}
    env = {**os.environ, **ports, "PATH": path, "MEMSTREAM_SETUP_NO_ROOT": "1",
           "MEMSTREAM_SERVICES_DIR": str(state), "PYTHON": sys.executable}
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


def stop_what_started(state: Path) -> None:
    """Should a service have been started after all, stop it by its pid (no other)."""
    for pid_file in state.glob("*/pid"):
        with contextlib.suppress(OSError, ValueError):
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)


def assert_clear(r: subprocess.CompletedProcess[str], program: str, package: str) -> None:
    out = r.stdout + r.stderr
    assert r.returncode != 0, out
    assert "Traceback" not in out, out
    assert program in r.stderr and package in r.stderr, out
    assert "apt-get install" in r.stderr and "make setup" in r.stderr, out


@pytest.mark.parametrize("program", list(HIDDEN))
def test_setup_names_the_missing_package_and_how_to_install_it(
        program: str, tmp_path: Path) -> None:
    path = path_without(program, tmp_path / "bin")
    r = run([BASH, str(ROOT / "scripts" / "setup.sh")], path, tmp_path / "services")
    assert_clear(r, program, HIDDEN[program])
    # it stopped before anything else: nothing fetched, built or installed
    assert "nothing was installed" in r.stderr
    assert "[setup] ready" not in r.stderr
    # the check alone says the same, root or not
    check = run([BASH, str(ROOT / "scripts" / "setup.sh"), "--check"], path,
                tmp_path / "services")
    assert_clear(check, program, HIDDEN[program])


def test_setup_check_passes_where_everything_is_installed(tmp_path: Path) -> None:
    r = run([BASH, str(ROOT / "scripts" / "setup.sh"), "--check"],
            os.environ.get("PATH", ""), tmp_path / "services")
    assert r.returncode == 0, r.stderr


# what `services.py up` is asked for: `make services` itself; and a service that
# comes before the one lacking its program, which must not be started either
@pytest.mark.parametrize(("program", "args"), [
    ("redis-server", ["up"]),
    ("java", ["up", "redis", "kafka"]),
])
def test_services_up_names_the_missing_program_and_starts_nothing(
        program: str, args: list[str], tmp_path: Path) -> None:
    path = path_without(program, tmp_path / "bin")
    state = tmp_path / "services"
    try:
        r = run([sys.executable, str(ROOT / "scripts" / "services.py"), *args], path, state)
    finally:
        stop_what_started(state)
    assert_clear(r, program, HIDDEN[program])
    assert "nothing was started" in r.stderr
    assert not list(state.glob("*/pid")), "a service was started"
