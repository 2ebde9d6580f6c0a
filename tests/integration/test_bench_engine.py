"""``make bench-engine`` on a small database: two builds (this one exported from git as
HEAD, and this checkout) answer the same questions in fresh processes, and the
replies of both match; a change to the ranking would make them differ."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.services import drop_database

ROOT = Path(__file__).resolve().parents[2]
SIZE = 300


def run_bench(*args: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "bench/engine.py", "--size", str(SIZE),
                           "--requests", "15", *args], cwd=ROOT, check=True,
                          capture_output=True, text=True, timeout=600)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_two_builds_in_turn_give_the_same_replies() -> None:
    try:
        out = run_bench("--fresh", "--against", "HEAD", "--rounds", "1")
        runs = out["runs"]
        assert isinstance(runs, dict) and set(runs) == {"HEAD", "this build"}
        for got in runs.values():
            assert got[0]["cpu_p50_ms"] > 0 and got[0]["wall_p50_ms"] >= got[0]["cpu_p50_ms"] / 4
        assert out["replies_identical"] is True
        again = run_bench()  # the database is kept: not seeded twice
        assert again["runs"]["this build"][0]["replies"] == runs["this build"][0]["replies"]
    finally:
        drop_database(f"bench_engine_{SIZE}")


def test_a_different_ranking_gives_other_replies(tmp_path: Path) -> None:
    """The comparison can fail: a build whose fused scores are squared answers otherwise."""
    from bench.engine import child, exported, seeded

    other = tmp_path / "other"
    shutil.copytree(exported("HEAD"), other)
    fusion = other / "streams" / "memory" / "rules" / "fusion.py"
    last = "    return ids, np.where(scaled > 0.0, scaled, 0.0)"
    assert last in fusion.read_text()
    squared = "    return ids, np.where(scaled > 0.0, scaled ** 2, 0.0)"
    fusion.write_text(fusion.read_text().replace(last, squared))
    try:
        url = asyncio.run(seeded(SIZE, fresh=True))
        assert child(ROOT, url, 15, 9)["replies"] != child(other, url, 15, 9)["replies"]
    finally:
        drop_database(f"bench_engine_{SIZE}")


def test_a_build_that_fails_says_why(tmp_path: Path) -> None:
    from bench.engine import child

    (tmp_path / "streams").mkdir()
    (tmp_path / "streams" / "__init__.py").write_text("")
    with pytest.raises(SystemExit, match=r"No module named 'streams\.memory'"):
        child(tmp_path, "mysql+aiomysql://nobody@127.0.0.1:1/none", 1, 9)


def test_two_versions_of_a_function_take_turns_in_one_process() -> None:
    """``bench/engine_swap.py``: HEAD's version of the budget's packing and this
    checkout's (the same code) answer in turn, and their replies match."""
    try:
        done = subprocess.run(
            [sys.executable, "bench/engine_swap.py", "HEAD",
             "streams/query/rules/budget.py:pack_budget", "streams/query/engine.py:pack_budget",
             "--size", str(SIZE), "--requests", "12", "--gap-ms", "0"],
            cwd=ROOT, check=True, capture_output=True, text=True, timeout=600)
        out = json.loads(done.stdout.strip().splitlines()[-1])
        assert out["revision"]["questions"] == out["this build"]["questions"] == 6
        assert out["revision"]["cpu_mean_ms"] > 0 and out["this build"]["cpu_mean_ms"] > 0
        assert out["replies_differing"] == "0 of 12"
    finally:
        drop_database(f"bench_engine_{SIZE}")


@pytest.mark.skipif(not (ROOT.parent / "shared" / "bench" / "beam-100k" / "1" / "chat.json")
                    .exists(), reason="the BEAM chats of ../shared are not here")
def test_beam_shaped_cubes_against_a_directory(tmp_path: Path) -> None:
    """``--shape beam`` seeds BEAM episodes (and the agent's lessons), and ``--against`` a
    directory compares with the build whose ``streams/`` it holds: a copy of this one
    gives the same replies."""
    shutil.copytree(ROOT / "streams", tmp_path / "streams",
                    ignore=shutil.ignore_patterns("__pycache__"))
    try:
        out = run_bench("--shape", "beam", "--fresh", "--against", str(tmp_path),
                        "--rounds", "1")
        assert out["shape"] == "beam" and set(out["runs"]) == {str(tmp_path), "this build"}
        assert out["replies_identical"] is True
    finally:
        drop_database(f"bench_engine_beam_{SIZE}")
