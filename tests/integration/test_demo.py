"""`make demo`'s command end to end: its own broker, SQLite, a worker, the sample
conversation stored, consolidated, asked for, and what erasing its user would delete."""

from __future__ import annotations

import json
import os
import subprocess

from tests.support.worker import MEMSTREAM, ROOT


def test_the_demo_runs_the_main_job() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTREAM_")}
    out = subprocess.run([*MEMSTREAM, "demo", "--timeout", "120"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    lines = out.stdout.splitlines()
    assert lines[-1] == "==> done"
    assert any("I'm vegetarian" in line for line in lines)  # the Session window and reply
    preview = json.loads(lines[-2])  # the erasure's dry run: counts, nothing deleted
    assert preview["conversation_message"] == 8 and preview["memory"] > 0
