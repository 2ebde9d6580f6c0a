"""The worker's token counter memoises a budget line for each memory the worker may
hold, so that a held memory's line is counted once however many queries show it."""

from __future__ import annotations

import pytest

from streams.settings import QuerySettings, RedisSettings, Settings
from streams.worker.runtime import Runtime


@pytest.mark.parametrize(("held", "memoised"), [
    (200_000, 200_000),  # the default: as many lines as memories held
    (123_456, 123_456),
    (1_000, 50_000),  # never fewer than the counter's own default
])
def test_the_token_memo_follows_the_memories_a_worker_holds(held: int, memoised: int) -> None:
    settings = Settings(redis=RedisSettings(url=None),
                        query=QuerySettings(scope_cache_memories=held))
    tokens = Runtime(settings, migrate=False).tokens
    assert tokens._count.maxsize == memoised
    assert tokens("two words") == 2
    assert Settings().query.scope_cache_memories == 200_000
