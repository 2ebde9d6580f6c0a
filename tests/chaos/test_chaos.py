"""No chat event lost, nothing remembered twice — proved from the outside.

The same seeded workload runs three times: undisturbed (phase A, the
reference); disturbed (phase B: several workers, SIGKILLs — one in the middle
of a consolidation — a worker added and then stopped, Redis and MariaDB
restarted, queries and callers with real deadlines throughout); and erased
(phase C: erasures of a user, a conversation, one memory and two group-chat
speakers — one while its session end is in flight, one while the other
speaker's run is (:mod:`tests.chaos.subjects`) — amid SIGKILLs and partitions
moving away and coming back after states expired, the returning
conversations held until then). Then SQL, the topics, the replies and Redis
are compared with what the workload must produce and with phase A, less what
was erased
(:mod:`tests.chaos.checks`, :mod:`tests.chaos.erasure_checks`).

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
from tests.chaos.phases import (
    PhaseResult,
    disturbed,
    erasures_phase,
    faults_phase,
    undisturbed,
)
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


@pytest.mark.timeout(2000)
async def test_no_event_is_lost_and_nothing_is_remembered_twice(tmp_path: Path) -> None:
    cfg = ChaosConfig.from_env()
    workload = build_workload(cfg.workload)
    a = await undisturbed(workload, cfg, tmp_path / "a")
    b = await disturbed(workload, cfg, tmp_path / "b", faults_phase(workload, cfg))
    findings = [("A", f) for f in check_phase(workload, a.snapshot)]
    findings += [("B", f) for f in check_phase(workload, b.snapshot, a.snapshot)]
    phases = [a, b]
    if workload.erasures:
        c = await disturbed(workload, cfg, tmp_path / "c", erasures_phase(workload, cfg))
        erased = erased_events(workload)
        findings += [("C", f) for f in check_phase(workload, c.snapshot, a.snapshot, erased)]
        findings += [("C", f) for f in erasure_checks(workload, c.snapshot, erased)]
        phases.append(c)
    text = report(cfg, phases, findings)
    out = Path(os.environ.get("CHAOS_REPORT", tmp_path / "chaos-report.txt"))
    await asyncio.to_thread(out.write_text, text + "\n")
    print(text)
    failed = "\n".join(f.render(phase) for phase, f in findings if not f.ok)
    assert not failed, f"chaos checks failed (report: {out}):\n{failed}\n\n{text}"
