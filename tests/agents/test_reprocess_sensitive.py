"""``memstream reprocess`` after the sensitive-content policy changed, on the real
built-in provider over SQLite with the real scanner: phone numbers kept, then
masked; e-mail addresses masked, then dropped. The rebuild applies the policy in
force, and a replaced memory whose text holds what that policy keeps out is deleted,
not kept as an expired row; one that holds nothing of it (already masked) is expired
as any other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import SecretStr
from sqlalchemy import text

from streams.consolidation.reprocess import ReprocessRequest
from streams.memory.agent_configs import StaticAgentConfigs
from streams.settings import DatabaseSettings, RedisSettings, Settings
from streams.worker.runtime import Runtime
from streams.worker.wiring import Wiring
from tests.agents.builtin_sqlite import TENANT, BuiltinStack
from tests.agents.fakes import FakePublisher

PHONE, EMAIL = "+44 20 7946 0958", "ann.lee@fastmail.com"


def agent(**policy: str) -> dict[str, Any]:
    return {"open_long_memory": True, "model": "m", "sensitive": policy}


async def rows(stack: BuiltinStack) -> dict[str, tuple[bool, str | None]]:
    """Every memory row: content -> (valid, masked kinds)."""
    async with stack.runtime.engine.connect() as conn:
        found = (await conn.execute(text(
            "SELECT content, valid_to, masked FROM memory WHERE content LIKE 'User:%' "
            "OR kind = 'fact'"))).all()
    return {r.content: (r.valid_to is None, r.masked) for r in found}


async def test_a_tightened_policy_is_applied_and_the_text_it_keeps_out_deleted(
        tmp_path: Path) -> None:
    settings = Settings(database=DatabaseSettings(
        url=SecretStr(f"sqlite+aiosqlite:///{tmp_path / 'm.db'}")), redis=RedisSettings(url=None))
    runtime = await Runtime(settings, migrate=True).start()
    try:
        configs = StaticAgentConfigs({(TENANT, "travel"): agent(phone="keep", email="mask")})
        wiring = Wiring(settings, runtime, publisher=FakePublisher(), agent_configs=configs)
        stack = BuiltinStack(runtime, wiring)
        await stack.session([("user", f"My phone number is {PHONE}."),
                             ("user", f"My email address is {EMAIL}."),
                             ("user", "I live in Berlin.")])
        assert await rows(stack) == {
            f"My phone number is {PHONE}.": (True, None),
            f"User: My phone number is {PHONE}.": (True, None),
            "My email address is [EMAIL].": (True, "email"),
            "User: My email address is [EMAIL].": (True, "email"),
            "I live in Berlin.": (True, None), "User: I live in Berlin.": (True, None)}

        configs.docs[(TENANT, "travel")] = agent(phone="mask", email="drop")
        reprocessor = wiring.reprocessor()
        job, _, _ = await reprocessor.start(ReprocessRequest(TENANT))
        assert job is not None
        report = await reprocessor.run(job)
        assert (report.written, report.kept, report.retired) == (2, 2, 4)
        assert await rows(stack) == {
            "My phone number is [PHONE].": (True, "phone"),
            "User: My phone number is [PHONE].": (True, "phone"),
            "My email address is [EMAIL].": (False, "email"),  # expired: nothing to hide
            "User: My email address is [EMAIL].": (False, "email"),
            "I live in Berlin.": (True, None), "User: I live in Berlin.": (True, None)}
    finally:
        await runtime.stop()
