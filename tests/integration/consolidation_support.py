"""Reading what consolidation produced, for the integration tests."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from tests.integration.conftest import Stack
from tests.support.worker import MEMSTREAM, ROOT

FAST = {
    # closing events retried quickly and given up on soon
    "MEMSTREAM_CONSOLIDATION__PROVIDER_ATTEMPTS": "2",
    "MEMSTREAM_CONSOLIDATION__PROVIDER_BACKOFF_INITIAL_S": "0.05",
    "MEMSTREAM_CONSOLIDATION__PROVIDER_BACKOFF_MAX_S": "0.1",
    "MEMSTREAM_CONSOLIDATION__RETRY_ATTEMPTS": "3",
    "MEMSTREAM_CONSOLIDATION__RETRY_BACKOFF_INITIAL_S": "0.5",
    "MEMSTREAM_CONSOLIDATION__RETRY_BACKOFF_MAX_S": "1",
    "MEMSTREAM_CONSOLIDATION__IDLE_TIMEOUT_S": "3",
    "MEMSTREAM_CONSOLIDATION__IDLE_SCAN_INTERVAL_S": "0.5",
    "MEMSTREAM_CONSOLIDATION__EXPIRY_SWEEP_INTERVAL_S": "1",
}


def memories(stack: Stack, tenant: str | None = None) -> list[tuple[str, ...]]:
    """(tenant, user, cube, kind, content, valid, superseded_by) of every stored memory."""
    where = f"WHERE tenant_id = '{tenant}'" if tenant else ""
    rows = stack.sql(
        "SELECT tenant_id, user_id, cube, kind, content, "
        "IF(valid_to IS NULL, 'valid', 'expired'), COALESCE(superseded_by, '') "
        f"FROM memory {where} ORDER BY id")
    return [tuple(r) for r in rows]


def contents(stack: Stack, kind: str = "fact", *, tenant: str | None = None,
             valid_only: bool = True) -> list[str]:
    return sorted(r[4] for r in memories(stack, tenant)
                  if r[3] == kind and (r[5] == "valid" or not valid_only))


def run_status(stack: Stack, closed_id: str) -> str | None:
    rows = stack.sql(f"SELECT status FROM consolidation_run WHERE closed_id = '{closed_id}'")
    return rows[0][0] if rows else None


def runs_done(stack: Stack) -> int:
    return int(stack.sql("SELECT COUNT(*) FROM consolidation_run WHERE status = 'done'")[0][0])


def runs_open(stack: Stack) -> int:
    return int(stack.sql("SELECT COUNT(*) FROM consolidation_run WHERE status <> 'done'")[0][0])


def memstream(stack: Stack, *args: str, env: dict[str, str] | None = None,
              check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run the ``memstream`` command line against the stack."""
    return subprocess.run([*MEMSTREAM, *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **stack.env(), **(env or {})}, check=check,
                          timeout=120)


def set_agent(stack: Stack, tenant: str, agent: str, *flags: str) -> dict[str, Any]:
    out = memstream(stack, "agent-config", "set", "--tenant", tenant, "--agent", agent, *flags)
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc
