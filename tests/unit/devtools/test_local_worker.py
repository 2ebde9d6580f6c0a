"""The one worker launcher: its environment, command line and process options."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import SecretStr

from streams.devtools.local_worker import LocalWorker, log_tail, worker_env
from streams.settings import KafkaSettings, QuerySettings, Settings, StatsToken, WebSettings


@pytest.fixture(autouse=True)
def outer_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSTREAM_KAFKA__BROKER", "kafka://outer:9092")
    monkeypatch.setenv("OTHER", "kept")


def settings() -> Settings:
    return Settings(kafka=KafkaSettings(broker="kafka://inner:9092"))


def test_with_settings_the_outer_memstream_variables_are_replaced() -> None:
    env = worker_env(settings())
    assert env["MEMSTREAM_KAFKA__BROKER"] == "kafka://inner:9092"
    assert env["MEMSTREAM_LOG_LEVEL"] == "warn"
    assert env["OTHER"] == "kept"


def test_with_settings_the_variables_that_are_no_setting_are_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMSTREAM_MIGRATIONS_DIR", "/srv/migrations")
    env = worker_env(settings())
    assert env["MEMSTREAM_MIGRATIONS_DIR"] == "/srv/migrations"
    assert env["MEMSTREAM_KAFKA__BROKER"] == "kafka://inner:9092"


def test_without_settings_the_environment_is_kept_and_env_comes_last() -> None:
    env = worker_env(None, log_level=None, env={"MEMSTREAM_WEB__PORT": "1234", "OTHER": "mine"})
    assert env["MEMSTREAM_KAFKA__BROKER"] == "kafka://outer:9092"
    assert env["MEMSTREAM_WEB__PORT"] == "1234"
    assert env["OTHER"] == "mine"
    assert "MEMSTREAM_LOG_LEVEL" not in env


def test_log_level_and_env_override_the_settings() -> None:
    env = worker_env(settings(), log_level="info", env={"MEMSTREAM_KAFKA__BROKER": "kafka://x:1"})
    assert env["MEMSTREAM_LOG_LEVEL"] == "info"
    assert env["MEMSTREAM_KAFKA__BROKER"] == "kafka://x:1"


class FakePopen:
    calls: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, argv: list[str], **kwargs: Any) -> None:
        self.argv = argv
        self.mode = kwargs["stdout"].mode
        FakePopen.calls.append({"argv": argv, **kwargs})

    def poll(self) -> int | None:
        return 0


@pytest.mark.parametrize(
    ("options", "argv_tail", "mode", "own_session", "cwd"),
    [
        pytest.param({}, ["worker"], "ab", True, None, id="defaults"),
        pytest.param({"args": ["--no-migrate"], "cwd": Path("/")},
                     ["worker", "--no-migrate"], "ab", True, Path("/"), id="args-and-cwd"),
        pytest.param({"append_log": False, "own_session": False}, ["worker"], "wb", False, None,
                     id="fresh-log-same-group"),
    ],
)
def test_start(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, options: dict[str, Any],
               argv_tail: list[str], mode: str, own_session: bool, cwd: Path | None) -> None:
    FakePopen.calls = []
    monkeypatch.setattr(subprocess, "Popen", FakePopen)
    log = tmp_path / "logs" / "worker.log"
    worker = LocalWorker(settings(), log, **options).start()
    (call,) = FakePopen.calls
    assert call["argv"] == [sys.executable, "-m", "streams.cli", *argv_tail]
    assert call["stderr"] is subprocess.STDOUT
    assert call["start_new_session"] is own_session
    assert call["cwd"] == cwd
    assert call["env"]["MEMSTREAM_KAFKA__BROKER"] == "kafka://inner:9092"
    assert isinstance(worker.proc, FakePopen) and worker.proc.mode == mode
    assert log.exists() and worker.exited


def test_a_wrapper_runs_before_the_worker(tmp_path: Path) -> None:
    worker = LocalWorker(None, tmp_path / "w.log", wrapper=["py-spy", "record", "--"])
    assert worker.argv[:4] == ["py-spy", "record", "--", sys.executable]
    assert worker.argv[-1] == "worker"


def test_log_tail(tmp_path: Path) -> None:
    assert log_tail(tmp_path / "missing.log") == ""
    (tmp_path / "w.log").write_text("x" * 10 + "end")
    assert log_tail(tmp_path / "w.log", 3) == "end"
    assert LocalWorker(None, tmp_path / "w.log").log_tail(5) == "x" * 2 + "end"


def test_settings_of_every_kind_reach_the_worker_as_they_were(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Lists, mappings of secrets and lists of models go as JSON (secrets revealed), so
    the worker's settings equal the launcher's."""
    launched = Settings(
        query=QuerySettings(reply_topics=["svc.replies", "*-out"],
                            tenant_keys={"acme": SecretStr("k" * 20)}),
        web=WebSettings(stats_tokens=[StatsToken(sha256="a" * 64, tenants=["acme", "*"])]))
    for name, value in worker_env(launched).items():
        if name.startswith("MEMSTREAM_"):
            monkeypatch.setenv(name, value)
    rebuilt = Settings()
    assert rebuilt.query.reply_topics == ["svc.replies", "*-out"]
    assert rebuilt.query.tenant_keys["acme"].get_secret_value() == "k" * 20
    assert rebuilt.web.stats_tokens == launched.web.stats_tokens
