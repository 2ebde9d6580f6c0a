"""An erasure holds no cube's lock while a provider it erases from is down: between
the provider's attempts the cube is free for the consolidations that write to it."""

from __future__ import annotations

import asyncio

from sqlalchemy.ext.asyncio import AsyncEngine

from streams.memory.model import USER_CUBE, cube_key
from streams.memory.provider import ProviderUnavailable, Scope
from streams.memory.registry import ProviderHandle, ProviderRegistry
from streams.testing.memory import FakeMemoryProvider
from streams.wire.envelope import ToSend
from streams.wire.erasure import ErasureReceipt
from tests.agents.test_erasure_edges import _record
from tests.agents.test_erasure_sqlite import Setup, request
from tests.support.worker import eventually


class DownProvider(FakeMemoryProvider):
    """An external provider whose ``forget_cube`` fails until ``up``."""

    def __init__(self) -> None:
        super().__init__("memos")
        self.up = False
        self.failures = 0

    async def forget_cube(self, scope: Scope, cube: str) -> int:
        if not self.up:
            self.failures += 1
            raise ProviderUnavailable("down", provider=self.name, operation="forget")
        return await super().forget_cube(scope, cube)


async def test_an_erasure_lets_the_cube_go_between_a_down_providers_attempts(
    engine: AsyncEngine,
) -> None:
    s = Setup(engine)
    await s.said()
    down = DownProvider()
    s.executor.copies.providers = ProviderRegistry({
        "mysql": s.executor.copies.providers.get("mysql"),
        "memos": ProviderHandle("memos", down)})
    erasing = asyncio.ensure_future(
        s.processor.handle(_record(request(target="user", user_id="u1"))))
    await eventually(lambda: down.failures >= 2 or erasing.done(), 10,
                     "the provider's second failure", 0.01)
    # the provider is still down, and the user's profile can be locked all the same
    locks = s.wiring.cube_locks()
    async with asyncio.timeout(5):
        async with locks.hold(cube_key("t1", USER_CUBE, "u1")):
            assert not erasing.done()
    down.up = True
    handled = await asyncio.wait_for(erasing, 10)
    assert isinstance(handled, ToSend)
    [receipt] = handled.records
    assert ErasureReceipt.model_validate_json(receipt.value or b"").status == "done"
