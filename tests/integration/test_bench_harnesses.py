"""`bench/locomo.py` and `bench/beam.py` end to end, from a fresh checkout.

The checkout is a ``git clone`` of this repository with the working tree laid
over it (every file ``git ls-files -co --exclude-standard`` lists: the tracked
ones as they are now, and the new ones not ignored), so it holds what a clone
of a commit of this tree would hold and nothing else: no ``.bench/``, no
``.memstream-data/``, no caches. Once the tree is committed it is a clean
clone. Each script runs with the venv's python in that checkout, on a tiny
sample written here (LoCoMo: one sample, two short sessions, two questions;
BEAM: one chat of two batches, three short sessions, three questions, one of
them a knowledge update), with ``--embedder none`` to be quick: exit 0 and
the JSON line's figures. A worker whose Faust data directory's parent does not
exist yet (``.bench/`` of a fresh checkout) must start.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

LOCOMO = [{
    "sample_id": "conv-t1",
    "conversation": {
        "speaker_a": "Ana", "speaker_b": "Ben",
        "session_1_date_time": "1:14 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a grey cat named Pixel."},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "Pixel is a lovely name for a cat!"},
        ],
        "session_2_date_time": "7:55 pm on 20 June, 2023",
        "session_2": [
            {"speaker": "Ana", "dia_id": "D2:1", "text": "I signed up for a pottery class."},
            {"speaker": "Ben", "dia_id": "D2:2", "text": "Pottery sounds relaxing."},
        ],
    },
    "qa": [
        {"question": "What is the name of Ana's cat?", "answer": "Pixel", "category": 4,
         "evidence": ["D1:1"]},
        {"question": "What class did Ana sign up for?", "answer": "pottery", "category": 4,
         "evidence": ["D2:1"]},
    ],
}]

BEAM_CHAT = [
    {"batch_number": 1, "time_anchor": None, "turns": [
        [{"role": "user", "id": 0, "time_anchor": "March-15-2024",
          "content": "My Flask budget app stores expenses in SQLite. ->-> 1,1"},
         {"role": "assistant", "id": 1, "content": "SQLite is a fine start for a budget app."}],
        [{"role": "user", "id": 2,
          "content": "The dashboard API answers in about 400ms right now. ->-> 1,2"},
         {"role": "assistant", "id": 3, "content": "Caching the totals would speed it up."}],
    ]},
    {"batch_number": 2, "time_anchor": None, "turns": [
        [{"role": "user", "id": 4, "time_anchor": "April-05-2024",
          "content": "After caching, the dashboard API answers in about 250ms. ->-> 2,1"},
         {"role": "assistant", "id": 5, "content": "Good: the cache cut it by a third."}],
    ]},
]
BEAM_QUESTIONS = {
    "information_extraction": [{"question": "Which database does my budget app use?",
                                "answer": "SQLite", "source_chat_ids": [0]}],
    "knowledge_update": [{"question": "How fast does the dashboard API answer?",
                          "answer": "about 250ms",
                          "source_chat_ids": {"original_info": [2], "updated_info": [4]}}],
    "abstention": [{"question": "Which bank does my app connect to?",
                    "ideal_response": "There is no information about a bank."}],
}


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clone of the repository with the working tree laid over it."""
    dest = tmp_path_factory.mktemp("checkout") / "memstream"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(dest)],
                   check=True, timeout=300)
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                            check=True, capture_output=True, text=True).stdout
    for rel in filter(None, listed.split("\0")):
        src, dst = ROOT / rel, dest / rel
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
        elif not src.exists():  # deleted in the working tree
            dst.unlink(missing_ok=True)
    return dest


def run_bench(checkout: Path, script: str, *args: str) -> dict[str, Any]:
    """Run ``bench/<script>`` in the checkout, which has no ``.bench/``; its JSON line."""
    assert not (checkout / ".bench").exists()
    try:
        out = subprocess.run([sys.executable, f"bench/{script}", "--embedder", "none", *args],
                             cwd=checkout, capture_output=True, text=True, timeout=600)
    finally:
        shutil.rmtree(checkout / ".bench", ignore_errors=True)  # the next run starts without
    assert out.returncode == 0, out.stderr[-4000:]
    doc: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return doc


def test_locomo_runs_from_a_fresh_checkout(checkout: Path, tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(LOCOMO))
    doc = run_bench(checkout, "locomo.py", "--data", str(data))
    assert doc["questions"] == 2 and doc["unscored"] == 0
    assert doc["embedder"] == "none" and doc["judge"] == "rules"
    assert 0.0 <= doc["b4k"] <= 1.0 and 0.0 <= doc["recall_at_10"] <= 1.0
    assert doc["p50_ms"] > 0


def test_beam_runs_from_a_fresh_checkout(checkout: Path, tmp_path: Path) -> None:
    chat = tmp_path / "beam" / "1"
    chat.mkdir(parents=True)
    (chat / "chat.json").write_text(json.dumps(BEAM_CHAT))
    (chat / "probing_questions.json").write_text(json.dumps(BEAM_QUESTIONS))
    doc = run_bench(checkout, "beam.py", "--data", str(tmp_path / "beam"))
    assert (doc["chats"], doc["sessions"], doc["asked"]) == (1, 3, 3)
    assert (doc["questions"], doc["unscored"], doc["unanswered"]) == (2, 1, 0)
    assert doc["embedder"] == "none" and doc["judge"] == "rules"
    assert set(doc["by_type"]) == {"information_extraction", "knowledge_update"}
    assert doc["knowledge_update"]["questions"] == 1 and doc["knowledge_update"]["skipped"] == 0
    assert 0.0 <= doc["b4k"] <= 1.0 and doc["all"] in (0.0, 0.5, 1.0)
    assert doc["tokens_used"]["max"] <= 4000 and doc["p50_ms"] > 0
    assert doc["cross_user"]["replies"] == 3
    assert doc["sessions_per_minute"] > 0
    assert [(q["chat"], q["n"], q["type"]) for q in doc["per_question"]] == [
        ("1", 1, "information_extraction"), ("1", 2, "knowledge_update"), ("1", 3, "abstention")]
