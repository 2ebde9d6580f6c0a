"""The migrations are found from any working directory, as an installed worker runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from streams.adapters.db.migrate import MigrationsNotFoundError, migrations_dir

ROOT = Path(__file__).resolve().parents[2]


def test_found_beside_the_package_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMSTREAM_MIGRATIONS_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert migrations_dir() == ROOT / "migrations"


def test_the_setting_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "env.py").write_text("")
    monkeypatch.setenv("MEMSTREAM_MIGRATIONS_DIR", str(tmp_path))
    assert migrations_dir() == tmp_path


def test_a_folder_without_env_py_is_not_taken(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSTREAM_MIGRATIONS_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("streams.adapters.db.migrate.__file__", str(tmp_path / "a/b/c/m.py"))
    with pytest.raises(MigrationsNotFoundError):
        migrations_dir()
