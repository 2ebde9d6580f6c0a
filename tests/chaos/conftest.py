"""The chaos test needs the real Kafka, Redis and MariaDB of ``make services``."""

from __future__ import annotations

import pytest

from tests.support.services import require_services


@pytest.fixture(scope="session", autouse=True)
def _services() -> None:
    require_services()
