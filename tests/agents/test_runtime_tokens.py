"""The worker's token counter memoises a budget line for each memory the worker may
hold, and as many other texts as a counter does by default, so that a held memory's
line is counted once however many queries show it; its built-in provider counts the
lines of the rows it reads into that counter."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from streams.query.line_counts import BudgetLineCounts
from streams.settings import DatabaseSettings, QuerySettings, RedisSettings, Settings
from streams.tokens import MEMO_TEXTS
from streams.worker.runtime import Runtime


@pytest.mark.parametrize("held", [200_000, 123_456, 1_000])
async def test_the_token_memo_follows_the_memories_a_worker_holds(held: int,
                                                                  tmp_path: Path) -> None:
    settings = Settings(redis=RedisSettings(url=None),
                        database=DatabaseSettings(url=SecretStr(
                            f"sqlite+aiosqlite:///{tmp_path / 'm.db'}")),
                        query=QuerySettings(scope_cache_memories=held, max_memory_chars=500))
    rt = await Runtime(settings, migrate=False).start()
    try:
        tokens = rt.tokens
        assert tokens._count.maxsize == held + MEMO_TEXTS
        assert tokens("two words") == 2
        assert Settings().query.scope_cache_memories == 50_000
        assert rt.providers.get("mysql").provider.cache.hold_max == min(held, 20_000)
        lines = rt.providers.get("mysql").provider.cache.rows_read
        assert isinstance(lines, BudgetLineCounts)
        assert (lines.counter, lines.max_chars) == (tokens, 500)
    finally:
        await rt.stop()
