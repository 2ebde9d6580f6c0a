"""Test tiers by folder: unit (pure, no event loop), agents (processors with
in-memory fakes), integration (real Kafka, Redis and MariaDB from
``make services``)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        rel = Path(str(item.fspath)).relative_to(ROOT)
        tier = rel.parts[0] if len(rel.parts) > 1 else None
        if tier in {"unit", "agents", "integration"}:
            item.add_marker(getattr(pytest.mark, tier))
