"""No chat event lost, nothing remembered twice — proved from the outside.

The same seeded workload runs twice: undisturbed (phase A, the reference) and
disturbed (phase B: several workers, SIGKILLs — one in the middle of a
consolidation — a worker added and one stopped, Redis and MariaDB restarted,
queries throughout, and erasures of a user, a conversation, one memory and two
group-chat speakers, one while its session end is in flight and one while the
other speaker's run is: :mod:`tests.chaos.subjects`). Then SQL, the topics, the
replies and Redis are compared with what the workload must produce and with
phase A less what was erased (:mod:`tests.chaos.checks`,
:mod:`tests.chaos.erasure_checks`).

Knobs: ``CHAOS_*`` environment variables (:mod:`tests.chaos.config`); the report
starts with the ones of this run, so a failing run is repeated with them.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.chaos.checks import Finding, check_phase
from tests.chaos.config import ChaosConfig
from tests.chaos.erasure_checks import erased_events, erasure_checks
from tests.chaos.phases import PhaseResult, disturbed, undisturbed
from tests.chaos.workload import build_workload


def report(cfg: ChaosConfig, phases: list[PhaseResult],
           findings: list[tuple[str, Finding]]) -> str:
    lines = [f"chaos run: {cfg.describe()}"]
    for p in phases:
        lines.append(f"--- {p.name}: {p.seconds:.0f}s, {p.settled}. {p.detail}")
        lines += [f"  {t}" for t in p.timeline.lines]
    failed = sum(1 for _, f in findings if not f.ok)
    lines.append(f"--- checks: {len(findings) - failed} passed, {failed} failed")
    lines += [f.render(phase) for phase, f in findings]
    return "\n".join(lines)


@pytest.mark.timeout(1500)
async def test_no_event_is_lost_and_nothing_is_remembered_twice(tmp_path: Path) -> None:
    cfg = ChaosConfig.from_env()
    workload = build_workload(cfg.workload)
    a = await undisturbed(workload, cfg, tmp_path / "a")
    b = await disturbed(workload, cfg, tmp_path / "b")
    erased = erased_events(workload)
    findings = [("A", f) for f in check_phase(workload, a.snapshot)]
    findings += [("B", f) for f in check_phase(workload, b.snapshot, a.snapshot, erased)]
    if workload.erasures:
        findings += [("B", f) for f in erasure_checks(workload, b.snapshot, erased)]
    text = report(cfg, [a, b], findings)
    out = Path(os.environ.get("CHAOS_REPORT", tmp_path / "chaos-report.txt"))
    await asyncio.to_thread(out.write_text, text + "\n")
    print(text)
    assert all(f.ok for _, f in findings), f"chaos checks failed (report: {out})\n{text}"
