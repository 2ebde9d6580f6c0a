"""The import contracts of ``pyproject.toml`` hold on the tree, and the ports
contract breaks when a stage imports an adapter or a driver (``make lint``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).parent / "lint-imports"
CONTRACT = ("The stages and memory's core say what they need as ports: no adapter, no Kafka, "
            "Redis, SQL or HTTP driver")


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([str(LINT)], cwd=tree, env=env, capture_output=True, text=True,
                          timeout=120)


def copy_tree(tmp: Path) -> Path:
    for package in ("streams", "agents"):
        shutil.copytree(ROOT / package, tmp / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp / "pyproject.toml")
    return tmp


def test_the_tree_keeps_every_contract(tmp_path: Path) -> None:
    out = lint(copy_tree(tmp_path))
    assert out.returncode == 0, out.stdout[-3000:]


@pytest.mark.parametrize(("module", "line"), [
    ("streams/query/engine.py", "import streams.adapters.kafka.publish"),
    ("streams/consolidation/pipeline.py", "from sqlalchemy import select"),
    ("streams/memory/registry.py", "import httpx"),
    ("streams/session/reader.py", "from redis.asyncio import Redis"),
    ("streams/query/rules/__init__.py", "import aiomysql"),
    ("streams/erasure/model.py", "import aiohttp"),
])
def test_a_stage_importing_an_adapter_or_a_driver_breaks_the_ports_contract(
        tmp_path: Path, module: str, line: str) -> None:
    tree = copy_tree(tmp_path)
    path = tree / module
    path.write_text(path.read_text() + f"\n{line}  # noqa\n")
    out = lint(tree)
    assert out.returncode != 0
    assert f"{CONTRACT} BROKEN" in " ".join(out.stdout.split()), out.stdout[-3000:]
