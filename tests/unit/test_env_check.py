"""Unknown ``MEMSTREAM_*`` variables: which names are refused, what is suggested,
and that nothing the project itself sets or reads would be refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streams.cli.env_check import (
    NOT_SETTINGS,
    RENAMED,
    UnknownSettingsError,
    UnknownVariable,
    check_environment,
    closest_setting,
    setting_variables,
    unknown_variables,
)
from tests.support.tree import files_under

ROOT = Path(__file__).resolve().parents[2]
KNOWN = setting_variables()

# (name given, the suggestion: None = refused with no suggestion)
SUGGESTIONS = [
    ("MEMSTREAM_SESSION__IDLE_TIMEOUT_S", "MEMSTREAM_CONSOLIDATION__IDLE_TIMEOUT_S"),  # group
    ("MEMSTREAM_DB__URL", "MEMSTREAM_DATABASE__URL"),  # group, the name in several groups
    ("MEMSTREAM_KAFKA__BROKERS", "MEMSTREAM_KAFKA__BROKER"),  # name
    ("MEMSTREAM_KAFKA__TIMEOUT_S", "MEMSTREAM_KAFKA__SESSION_TIMEOUT_S"),  # within its group
    ("MEMSTREAM_QUERY__TOP_K", "MEMSTREAM_QUERY__PREF_TOP_K"),
    ("MEMSTREAM_KAFKA_BROKER", "MEMSTREAM_KAFKA__BROKER"),  # one underscore for two
    ("MEMSTREAM_LOGLEVEL", "MEMSTREAM_LOG_LEVEL"),  # a top-level setting
    ("memstream_kafka__brokers", "MEMSTREAM_KAFKA__BROKER"),  # lower case is read too
    ("MEMSTREAM_KAFKA__BROKER__URL", "MEMSTREAM_KAFKA__BROKER"),  # nested too deep
    ("MEMSTREAM_FOO", None),
    ("MEMSTREAM_KAFKA", None),  # a group is no setting
]


@pytest.mark.parametrize(("name", "suggestion"), SUGGESTIONS)
def test_the_closest_setting_is_suggested(name: str, suggestion: str | None) -> None:
    assert closest_setting(name, KNOWN) == suggestion
    assert unknown_variables([name], KNOWN) == [UnknownVariable(name, suggestion)]


# (environment names, the names refused)
ENVIRONMENTS: list[tuple[list[str], list[str]]] = [
    ([], []),
    (["PATH", "HOME", "KAFKA_BROKER", "XMEMSTREAM_FOO"], []),  # other prefixes are not ours
    (["MEMSTREAM_KAFKA__BROKER", "MEMSTREAM_LOG_LEVEL", "MEMSTREAM_WINDOW__MAX_TOKEN_WINDOW"], []),
    (["memstream_kafka__broker", "Memstream_Log_Level"], []),  # read case-insensitively
    (sorted(NOT_SETTINGS), []),
    (["MEMSTREAM_TEST_KAFKA_PORT", "MEMSTREAM_TEST_KAFKA_PORTS"], ["MEMSTREAM_TEST_KAFKA_PORTS"]),
    (["MEMSTREAM_KAFKA__BROKERS", "MEMSTREAM_KAFKA__BROKER", "MEMSTREAM_SESSION__IDLE_TIMEOUT_S"],
     ["MEMSTREAM_KAFKA__BROKERS", "MEMSTREAM_SESSION__IDLE_TIMEOUT_S"]),
    (["MEMSTREAM_", "MEMSTREAM_KAFKA__"], ["MEMSTREAM_", "MEMSTREAM_KAFKA__"]),
]


@pytest.mark.parametrize(("names", "refused"), ENVIRONMENTS)
def test_only_names_that_are_no_setting_are_refused(names: list[str], refused: list[str]) -> None:
    assert [u.name for u in unknown_variables(names, KNOWN)] == refused


def test_the_known_names_are_every_setting_and_no_group() -> None:
    assert "MEMSTREAM_KAFKA__BROKER" in KNOWN
    assert "MEMSTREAM_CONSOLIDATION__IDLE_TIMEOUT_S" in KNOWN
    assert "MEMSTREAM_LOG_LEVEL" in KNOWN
    assert "MEMSTREAM_KAFKA" not in KNOWN
    assert not KNOWN & set(NOT_SETTINGS)


def test_one_error_names_every_unknown_variable_and_its_suggestion() -> None:
    env = {"MEMSTREAM_SESSION__IDLE_TIMEOUT_S": "60", "MEMSTREAM_KAFKA__BROKERS": "kafka://x",
           "MEMSTREAM_FOO": "", "MEMSTREAM_KAFKA__BROKER": "kafka://y", "MEMSTREAM_CACHE": "/c",
           "PATH": "/bin"}
    with pytest.raises(UnknownSettingsError) as err:
        check_environment(env)
    assert [u.name for u in err.value.unknown] == [
        "MEMSTREAM_FOO", "MEMSTREAM_KAFKA__BROKERS", "MEMSTREAM_SESSION__IDLE_TIMEOUT_S"]
    lines = str(err.value).splitlines()
    assert lines[1:] == [
        "  MEMSTREAM_FOO: no setting is named alike",
        "  MEMSTREAM_KAFKA__BROKERS: did you mean MEMSTREAM_KAFKA__BROKER?",
        "  MEMSTREAM_SESSION__IDLE_TIMEOUT_S: did you mean "
        "MEMSTREAM_CONSOLIDATION__IDLE_TIMEOUT_S?",
    ]


def test_an_environment_of_settings_passes() -> None:
    check_environment({"MEMSTREAM_KAFKA__BROKER": "kafka://y", "MEMSTREAM_TEST_MYSQL_PORT": "1"})


# ------------------------------------------------- what the project sets and reads
NAME = r"MEMSTREAM_[A-Z0-9_]*[A-Z0-9]"
SET_OR_READ = [re.compile(p, re.M) for p in (
    rf"[\"']({NAME})[\"']",  # a string literal: a dict key, an environ lookup
    rf"\b({NAME})=",  # shell, Dockerfile ENV
    rf"\$\{{({NAME})\b",  # ${NAME} in shell and Compose
    rf"^\s*-?\s*({NAME}):",  # a YAML key: Compose environment, ConfigMap, Secret
    rf"\bname:\s*({NAME})\b",  # a Kubernetes env entry
)]
SKIP_DIRS = {".git", ".venv", "__pycache__", ".services", ".mypy_cache", ".ruff_cache",
             ".pytest_cache", ".bench", ".memstream-data"}
# the tests of the check itself set unknown names on purpose
SKIP_FILES = {Path(__file__).resolve(),
              ROOT / "tests" / "integration" / "test_unknown_settings.py"}


def _project_files() -> list[Path]:
    return [p for p in sorted(files_under(ROOT, SKIP_DIRS))
            if p.is_file() and p.resolve() not in SKIP_FILES]


def test_every_variable_the_project_sets_or_reads_is_accepted() -> None:
    """Tests, benchmarks, scripts, CI, Compose, Kubernetes and the Dockerfile set
    only settings or the names of NOT_SETTINGS; the code reads no other name."""
    found: dict[str, set[str]] = {}
    for path in _project_files():
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        for pattern in SET_OR_READ:
            for m in pattern.finditer(text):
                found.setdefault(m.group(1), set()).add(str(path.relative_to(ROOT)))
    assert {"MEMSTREAM_KAFKA__BROKER", "MEMSTREAM_MIGRATIONS_DIR",
            "MEMSTREAM_TEST_KAFKA_PORT", "MEMSTREAM_COMPOSE_KAFKA_PORT"} <= set(found)
    # the renamed ones are named by the table that refuses them
    bad = {u.name: sorted(found[u.name]) for u in unknown_variables(
        found, KNOWN, allowed={*NOT_SETTINGS, *RENAMED})}
    assert not bad, f"set or read, but neither a setting nor in NOT_SETTINGS: {bad}"


def test_every_name_outside_the_settings_is_used() -> None:
    """NOT_SETTINGS lists only names something really reads."""
    text = "\n".join(p.read_text(errors="replace") for p in _project_files()
                     if p.suffix in {".py", ".sh", ".yml", ".yaml", ""}
                     and p.name != "env_check.py")
    unused = [n for n in NOT_SETTINGS if n not in text]
    assert not unused, unused


def test_a_renamed_setting_points_at_its_new_name() -> None:
    [u] = unknown_variables(["MEMSTREAM_CONSOLIDATION__BATCH_SIZE"], KNOWN)
    assert u.suggestion == "MEMSTREAM_CONSOLIDATION__MAX_PENDING"
