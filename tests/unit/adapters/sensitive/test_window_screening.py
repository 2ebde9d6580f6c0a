"""The Session window screened with the tenant's and agent's policy: masked spans
replaced, a message holding a dropped kind left out, what is stored untouched; each
text screened once while it stays in the bounded cache."""

from __future__ import annotations

from typing import Any

from streams.adapters.sensitive.window_screening import WindowScreening
from streams.consolidation.rules.sensitive.kinds import Kind
from streams.consolidation.rules.sensitive.policy import DEFAULT_ACTIONS
from streams.consolidation.screening import Screening
from streams.memory.agent_configs import StaticAgentConfigs
from streams.session.reader import SessionWindow
from streams.testing.consolidation import ListedDetector

DEPLOYMENT = {k.value: a.value for k, a in DEFAULT_ACTIONS.items()}
LISTED = {"a@b.io": Kind.EMAIL, "sk-123": Kind.SECRET, "Ann": Kind.NAME}


def window(*texts: str, tool: tuple[str, ...] = ()) -> SessionWindow:
    return SessionWindow("t", "c", [{"role": "user", "content": t, "event_id": f"e{i}"}
                                    for i, t in enumerate(texts)],
                         tool=[{"role": "tool", "content": t} for t in tool])


def screening(detector: ListedDetector, configs: dict[tuple[str, str], Any] | None = None,
              **kw: int) -> WindowScreening:
    return WindowScreening(Screening(detector, DEPLOYMENT),
                           StaticAgentConfigs(configs or {}), **kw)


async def test_masks_drops_and_keeps_as_the_policy_says() -> None:
    w = window("mail a@b.io please", "my key is sk-123", "Ann says hi", "",
               tool=("token sk-123", "ok"))
    got = await screening(ListedDetector(LISTED)).screen("t", "a", w)
    assert [m["content"] for m in got.messages] == ["mail [EMAIL] please", "Ann says hi", ""]
    assert [m["event_id"] for m in got.messages] == ["e0", "e2", "e3"]
    assert [m["content"] for m in got.tool] == ["ok"]
    assert w.messages[0]["content"] == "mail a@b.io please"  # the stored window untouched
    assert got.messages[1] is w.messages[2]  # nothing found: the same message


async def test_the_agents_configuration_applies() -> None:
    configs = {("t", "a"): {"sensitive": {"email": "drop", "name": "mask"}}}
    got = await screening(ListedDetector(LISTED), configs).screen(
        "t", "a", window("mail a@b.io", "Ann says hi"))
    assert [m["content"] for m in got.messages] == ["[NAME] says hi"]


async def test_each_text_is_screened_once_while_cached() -> None:
    detector = ListedDetector(LISTED)
    s = screening(detector)
    for _ in range(3):
        await s.screen("t", "a", window("mail a@b.io", "hello", "hello"))
    assert sorted(detector.seen) == ["hello", "mail a@b.io"]
    # another policy is another entry
    await s.screen("t", "b", window("hello"))
    await WindowScreening(s.screening, StaticAgentConfigs(
        {("t", "x"): {"sensitive": {"email": "drop"}}})).screen("t", "x", window("hello"))
    assert sorted(detector.seen) == ["hello", "hello", "mail a@b.io"]


async def test_the_cache_is_bounded_in_entries_and_characters() -> None:
    detector = ListedDetector(LISTED)
    s = screening(detector, entries=2, chars=1_000)
    await s.screen("t", "a", window("one", "two", "three"))
    assert len(s._cache) == 2
    await s.screen("t", "a", window("x" * 600, "y" * 600))
    assert s._held <= 1_000 and len(s._cache) == 1
    got = await s.screen("t", "a", window("z" * 5_000))  # larger than the cache: still served
    assert got.messages[0]["content"] == "z" * 5_000


async def test_a_policy_that_acts_on_nothing_findable_detects_nothing() -> None:
    detector = ListedDetector(LISTED, finds_names=False)
    configs = {("t", "a"): {"sensitive": {k: "keep" for k in DEPLOYMENT}}}
    w = window("mail a@b.io")
    assert (await screening(detector, configs).screen("t", "a", w)).messages == w.messages
    assert detector.seen == []
