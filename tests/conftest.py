"""Test tiers by folder: unit (pure, no event loop), agents (processors with
in-memory fakes), integration (real Kafka, Redis and MariaDB from
``make services``), chaos (the whole system under faults; it runs after the
rest of the suite, so a plain ``pytest`` ends with it).

Chaos tests, and the integration tests marked ``alone`` (they time replies
against a deadline, or stop a service other tests use), must not share the
machine with other tests: ``make test`` runs every other test on ``TEST_WORKERS``
processes (``pytest -n 2 -m "not alone"``), then these one at a time (``-m alone``).
A plain ``pytest -n N`` would run them beside others: select them apart as it does."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).parent

# Property tests: no per-example deadline (the machine is shared and the
# integration properties write to MariaDB); tests that need fewer examples say
# so. HYPOTHESIS_PROFILE=thorough runs ten times as many.
settings.register_profile(
    "memstream", max_examples=200, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("thorough", parent=settings.get_profile("memstream"),
                          max_examples=2000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "memstream"))


def _tier(item: pytest.Item) -> str | None:
    rel = Path(str(item.fspath)).relative_to(ROOT)
    return rel.parts[0] if len(rel.parts) > 1 else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = _tier(item)
        if tier in {"unit", "agents", "integration", "chaos"}:
            item.add_marker(getattr(pytest.mark, tier))
        if tier == "chaos":
            item.add_marker(pytest.mark.alone)
    items.sort(key=lambda item: _tier(item) == "chaos")  # stable: the rest keeps its order
