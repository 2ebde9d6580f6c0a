"""Work handed off is kept until done; failures are logged, cancellations not."""

from __future__ import annotations

import asyncio
import logging

import pytest

from streams.kept_tasks import KeptTasks


async def test_tasks_are_kept_until_done_and_failures_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    kept = KeptTasks("a test task")
    go = asyncio.Event()

    async def fails() -> None:
        await go.wait()
        raise RuntimeError("boom")

    async def waits() -> None:
        await go.wait()

    failing, cancelled = kept.keep(fails()), kept.keep(waits())
    assert len(kept) == 2
    cancelled.cancel()
    with caplog.at_level(logging.DEBUG, logger="streams.kept_tasks"):
        go.set()
        await kept.wait(10.0)
        await asyncio.sleep(0)
    assert len(kept) == 0 and failing.done() and cancelled.cancelled()
    assert [r.getMessage() for r in caplog.records] == [
        "a test task failed: RuntimeError('boom')"]
