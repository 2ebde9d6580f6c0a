"""Idle session end, and a newer contradicting fact superseding the old one in the
built-in provider (history kept)."""

from __future__ import annotations

import json

from streams.adapters.db.engine import create_engine
from streams.memory.model import USER_CUBE
from streams.memory.provider import Scope, SearchRequest
from streams.memory.providers.builtin.provider import BuiltinProvider
from streams.settings import DatabaseSettings
from tests.integration.conftest import Stack, chat_event, session_end_event
from tests.integration.consolidation_support import FAST, contents, memstream, run_status
from tests.support.worker import eventually


async def test_idle_end_then_a_newer_fact_supersedes_the_old_one(stack: Stack) -> None:
    stack.extra_env.update(FAST)  # idle after 3 s
    stack.worker().start()
    await stack.produce([chat_event(0, "c1", content="I live in Berlin."),
                         chat_event(1, "c1", content="Lovely city.")])
    await eventually(lambda: run_status(stack, "t1/c1#1") == "done", 60, "the idle close")
    (closed,) = await stack.read_topic(stack.topics["closed"], expect=1)
    assert json.loads(closed.value)["trigger"] == "idle"
    assert contents(stack) == ["I live in Berlin."]

    # messages after the close open the next session; only they are consolidated
    await stack.produce([chat_event(2, "c1", content="Actually, I live in Paris now."),
                         chat_event(3, "c1", content="Noted."), session_end_event("c1")])
    await eventually(lambda: run_status(stack, "t1/c1#2") == "done", 60, "the explicit close")
    assert contents(stack) == ["I live in Paris now."]
    assert len(contents(stack, "episode")) == 4

    engine = create_engine(DatabaseSettings(url=stack.db_url))  # type: ignore[arg-type]
    try:
        provider = BuiltinProvider(engine)
        scope = Scope("t1", "u1", "a1")
        found = await provider.search(scope, SearchRequest("Where do I live?", cubes=[USER_CUBE]))
        assert [m.content for m in found if m.kind == "fact"] == ["I live in Paris now."]
        history = {m.content: m for m in await provider.history(scope, USER_CUBE)
                   if m.kind == "fact"}
        old, new = history["I live in Berlin."], history["I live in Paris now."]
        assert old.metadata["valid_to"] is not None
        assert old.metadata["superseded_by"] == new.id
        assert new.metadata["valid_to"] is None
        assert old.event_time is not None and new.event_time is not None
        assert old.event_time < new.event_time  # the messages' times, not processing time
    finally:
        await engine.dispose()

    # the command line shows the same, history included on request
    args = ["memories", "--tenant", "t1", "--user", "u1", "--agent", "a1", "--kind", "fact"]
    valid = json.loads(memstream(stack, *args, "--format", "json").stdout)
    assert [d["content"] for d in valid] == ["I live in Paris now."]
    audit = json.loads(memstream(stack, *args, "--all", "--format", "json").stdout)
    assert [(d["content"], d["superseded_by"]) for d in audit] == [
        ("I live in Berlin.", valid[0]["id"]), ("I live in Paris now.", None)]
    assert "(superseded by" in memstream(stack, *args, "--all").stdout
