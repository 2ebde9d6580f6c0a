"""A starting worker waits for a database it cannot reach yet (restarting, or not
ready), and gives up at once on what waiting cannot heal."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy.exc

from streams.adapters.db.migrate import SchemaNotCurrentError
from streams.cli import worker


def refused() -> Exception:
    return sqlalchemy.exc.OperationalError("connect", {}, ConnectionRefusedError(111, "refused"))


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    monkeypatch.setenv("MEMSTREAM_DATABASE__URL", "sqlite+aiosqlite:///:memory:")
    worker.get_settings.cache_clear()
    seen: list[str] = []

    async def no_sleep(_: float) -> None:
        return None

    monkeypatch.setattr("streams.backoff.asyncio.sleep", no_sleep)
    yield seen
    monkeypatch.undo()
    worker.get_settings.cache_clear()  # the settings of the environment again


async def test_an_unreachable_database_is_waited_for(calls: list[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    failures = [refused(), refused()]

    async def upgrade(engine: Any) -> None:
        calls.append("upgrade")
        if failures:
            raise failures.pop()

    monkeypatch.setattr(worker, "upgrade", upgrade)
    await worker._prepare(create_topics=False, migrate=True)
    assert calls == ["upgrade"] * 3


async def test_a_schema_refused_fails_at_once(calls: list[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    async def require_current(engine: Any) -> None:
        calls.append("check")
        raise SchemaNotCurrentError("behind")

    monkeypatch.setattr(worker, "require_current", require_current)
    with pytest.raises(SchemaNotCurrentError):
        await worker._prepare(create_topics=False, migrate=False)
    assert calls == ["check"]


async def test_the_wait_is_bounded(calls: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    async def upgrade(engine: Any) -> None:
        calls.append("upgrade")
        raise refused()

    monkeypatch.setattr(worker, "DATABASE_WAIT_S", -1.0)
    monkeypatch.setattr(worker, "upgrade", upgrade)
    with pytest.raises(sqlalchemy.exc.OperationalError):
        await worker._prepare(create_topics=False, migrate=True)
    assert calls == ["upgrade"]
