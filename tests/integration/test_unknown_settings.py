"""``memstream`` refuses to start with a ``MEMSTREAM_*`` variable that is no
setting: the real command, as a subprocess, exits at once with one error naming
each unknown variable and the setting meant, before it connects anywhere."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator

import pytest

from tests.support.worker import MEMSTREAM, ROOT, wait_until

pytestmark = pytest.mark.integration

TYPOS = {
    "MEMSTREAM_SESSION__IDLE_TIMEOUT_S": "60",  # the group is consolidation
    "MEMSTREAM_KAFKA__BROKERS": "kafka://127.0.0.1:9",  # the name is broker
}


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A port that accepts connections and keeps them waiting: the broker and the
    database the command is pointed at. Anything that connects is seen."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    s.setblocking(False)
    yield s
    s.close()


def connected(s: socket.socket) -> bool:
    try:
        conn, _ = s.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def pointed_at(s: socket.socket) -> dict[str, str]:
    port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")}
    env.update({"MEMSTREAM_KAFKA__BROKER": f"kafka://127.0.0.1:{port}",
                "MEMSTREAM_DATABASE__URL": f"mysql+aiomysql://u:p@127.0.0.1:{port}/db",
                "MEMSTREAM_DATABASE__CONNECT_TIMEOUT_S": "3"})
    return env


@pytest.mark.parametrize("argv", [["worker"], ["db", "upgrade"], ["topics", "create"],
                                  ["config", "show"]], ids=" ".join)
def test_a_command_with_a_mistyped_variable_refuses_to_start(
        listener: socket.socket, argv: list[str]) -> None:
    r = subprocess.run([*MEMSTREAM, *argv], env={**pointed_at(listener), **TYPOS}, cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines() == [
        "memstream: error: unknown MEMSTREAM_* environment variables (no such setting; "
        "docs/configuration.md lists them all):",
        "  MEMSTREAM_KAFKA__BROKERS: did you mean MEMSTREAM_KAFKA__BROKER?",
        "  MEMSTREAM_SESSION__IDLE_TIMEOUT_S: did you mean "
        "MEMSTREAM_CONSOLIDATION__IDLE_TIMEOUT_S?",
    ]
    assert r.stdout == ""
    assert not connected(listener), "the command connected before refusing to start"


def test_the_same_command_without_the_typo_connects(listener: socket.socket) -> None:
    """The control: pointed at the listener, a command that starts connects to it."""
    proc = subprocess.Popen([*MEMSTREAM, "db", "current"], env=pointed_at(listener), cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: connected(listener), 60, "the command to connect to the database")
    finally:
        proc.kill()
        proc.wait(10)
