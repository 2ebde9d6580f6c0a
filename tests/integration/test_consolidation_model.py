"""A model configured (the fake OpenAI-compatible server): one judge call per session
end, a conflict call only for a cube with stored memories, rules when it fails."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.openai import FakeOpenAI
from tests.integration.conftest import Stack, chat_event, session_end_event
from tests.integration.consolidation_support import FAST, contents, run_status
from tests.support.worker import eventually


def answer(body: dict[str, Any]) -> str:
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if system.startswith("You extract durable"):
        found = re.findall(r"(\d+)\. \[NEW\] \S+ \S+ user: I live in (\w+)", user)
        return "```json\n" + json.dumps([
            {"content": f"The user lives in {city}.", "type": "fact", "scope": "user",
             "importance": 0.8, "source": [int(n)]} for n, city in found]) + "\n```"
    ids = re.findall(r"stored id=(\S+)", user)
    return json.dumps([{"index": 1, "action": "supersede", "expire_ids": ids[:1]}])


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(handler=answer) as server:
        yield server


def purposes(llm: FakeOpenAI) -> list[str]:
    return ["judge" if b["messages"][0]["content"].startswith("You extract") else "conflict"
            for b in llm.chat_requests()]


async def test_the_model_judges_and_resolves_conflicts_and_rules_stand_in(
    stack: Stack, llm: FakeOpenAI
) -> None:
    stack.extra_env.update(FAST)
    stack.extra_env.update({"MEMSTREAM_LLM__BASE_URL": llm.base_url,
                            "MEMSTREAM_LLM__MODEL": "fake-judge", "MEMSTREAM_LLM__ATTEMPTS": "2"})
    stack.worker().start()
    await stack.produce([chat_event(0, "c1", content="I live in Berlin."),
                         chat_event(1, "c1", content="Nice."), session_end_event("c1")])
    await eventually(lambda: run_status(stack, "t1/c1#1") == "done", 60, "session 1")
    assert contents(stack) == ["The user lives in Berlin."]
    assert purposes(llm) == ["judge"]  # nothing stored yet: no conflict call

    await stack.produce([chat_event(2, "c1", content="I live in Paris."),
                         session_end_event("c1", n=1)])
    await eventually(lambda: run_status(stack, "t1/c1#2") == "done", 60, "session 2")
    assert purposes(llm) == ["judge", "judge", "conflict"]
    assert contents(stack) == ["The user lives in Paris."]

    # the model failing (after the client's own retries): the rule judge stands in
    llm.fail_always(status=500)
    await stack.produce([chat_event(4, "c1", content="I work as a nurse."),
                         session_end_event("c1", n=2)])
    await eventually(lambda: run_status(stack, "t1/c1#3") == "done", 60, "session 3")
    assert stack.sql("SELECT judge FROM consolidation_run WHERE closed_id = 't1/c1#3'") == [
        ["rules"]]
    assert "I work as a nurse." in contents(stack)
