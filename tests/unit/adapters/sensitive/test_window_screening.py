"""The Session window's messages and summary screened with the tenant's and agent's
policy before the window is built: masked spans replaced (in the content, the
speaker's name and tool calls' arguments), a message holding a dropped kind left out,
the summary masked, what is stored untouched; each text screened once while it stays
in the bounded cache."""

from __future__ import annotations

from typing import Any

from streams.adapters.sensitive.window_screening import WindowScreening
from streams.consolidation.rules.sensitive.kinds import Kind
from streams.consolidation.rules.sensitive.policy import DEFAULT_ACTIONS
from streams.consolidation.screening import Screening
from streams.memory.agent_configs import StaticAgentConfigs
from streams.testing.consolidation import ListedDetector

DEPLOYMENT = {k.value: a.value for k, a in DEFAULT_ACTIONS.items()}
LISTED = {"a@b.io": Kind.EMAIL, "sk-123": Kind.SECRET, "Ann": Kind.NAME}


def docs(*texts: str) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t, "event_id": f"e{i}"}
            for i, t in enumerate(texts)]


def screening(detector: ListedDetector, configs: dict[tuple[str, str], Any] | None = None,
              **kw: int) -> WindowScreening:
    return WindowScreening(Screening(detector, DEPLOYMENT),
                           StaticAgentConfigs(configs or {}), **kw)


async def test_masks_drops_and_keeps_as_the_policy_says() -> None:
    said = docs("mail a@b.io please", "ok", "my key is sk-123", "noted", "Ann says hi", "")
    got, summary = await screening(ListedDetector(LISTED)).screen(
        "t", "a", said, "User gave a@b.io and sk-123.")
    assert [m["content"] for m in got] == ["mail [EMAIL] please", "ok", "noted",
                                           "Ann says hi", ""]
    assert summary == "User gave [EMAIL] and [SECRET]."  # a summary is masked, never dropped
    assert said[0]["content"] == "mail a@b.io please"  # what is stored is untouched
    assert got[1] is said[1]  # nothing found: the same message


async def test_names_and_tool_call_arguments_are_screened_too() -> None:
    said = [{"role": "user", "content": "hi", "name": "a@b.io"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "1", "function": {"name": "f", "arguments": '{"to": "a@b.io"}'}},
                {"id": "2", "function": {"name": "g", "arguments": "{}"}}]},
            {"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": "h", "arguments": '{"key": "sk-123"}'}}]}]
    got, _ = await screening(ListedDetector(LISTED)).screen("t", "a", said, None)
    assert got[0]["name"] == "[EMAIL]"
    assert got[1]["tool_calls"][0]["function"]["arguments"] == '{"to": "[EMAIL]"}'
    assert got[1]["tool_calls"][1] == said[1]["tool_calls"][1]
    assert len(got) == 2  # the call holding a key is left out
    assert said[1]["tool_calls"][0]["function"]["arguments"] == '{"to": "a@b.io"}'


async def test_the_agents_configuration_applies() -> None:
    configs = {("t", "a"): {"sensitive": {"email": "drop", "name": "mask"}}}
    got, _ = await screening(ListedDetector(LISTED), configs).screen(
        "t", "a", docs("mail a@b.io", "Ann says hi"), None)
    assert [m["content"] for m in got] == ["[NAME] says hi"]


async def test_each_text_is_screened_once_while_cached() -> None:
    detector = ListedDetector(LISTED)
    s = screening(detector)
    for _ in range(3):
        await s.screen("t", "a", docs("mail a@b.io", "hello", "hello"), None)
    assert sorted(detector.seen) == ["hello", "mail a@b.io"]
    await s.screen("u", "a", docs("hello"), None)  # another tenant's counts are its own
    await WindowScreening(s.screening, StaticAgentConfigs(
        {("t", "x"): {"sensitive": {"email": "drop"}}})).screen("t", "x", docs("hello"), None)
    assert sorted(detector.seen) == ["hello", "hello", "hello", "mail a@b.io"]


async def test_the_cache_is_bounded_in_entries_and_characters() -> None:
    s = screening(ListedDetector(LISTED), entries=2, chars=1_000)
    await s.screen("t", "a", docs("one", "two", "three"), None)
    assert len(s._cache) == 2
    await s.screen("t", "a", docs("x" * 600, "y" * 600), None)
    assert s._held <= 1_000 and len(s._cache) == 1
    got, _ = await s.screen("t", "a", docs("z" * 5_000), None)  # larger than the cache
    assert got[0]["content"] == "z" * 5_000


async def test_a_policy_that_acts_on_nothing_findable_detects_nothing() -> None:
    detector = ListedDetector(LISTED, finds_names=False)
    configs = {("t", "a"): {"sensitive": {k: "keep" for k in DEPLOYMENT}}}
    said = docs("mail a@b.io")
    assert (await screening(detector, configs).screen("t", "a", said, None))[0] == said
    assert detector.seen == []
