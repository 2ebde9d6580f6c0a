"""Test tiers by folder: unit (pure, no event loop), agents (processors with
in-memory fakes), integration (real Kafka, Redis and MariaDB from
``make services``), chaos (the whole system under faults; it runs after the
rest of the suite, so a plain ``pytest`` ends with it)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).parent


def _tier(item: pytest.Item) -> str | None:
    rel = Path(str(item.fspath)).relative_to(ROOT)
    return rel.parts[0] if len(rel.parts) > 1 else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = _tier(item)
        if tier in {"unit", "agents", "integration", "chaos"}:
            item.add_marker(getattr(pytest.mark, tier))
    items.sort(key=lambda item: _tier(item) == "chaos")  # stable: the rest keeps its order
