"""ConsolidationPipeline on SQLite with an in-memory provider: ledger, run records,
judge fallbacks, conflicts, write-then-expire, episodes, summaries, routing."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.schema import consolidation as cs
from streams.adapters.db.schema.conversation import conversation_summary
from streams.memory.provider import ProviderTimeout, ProviderUnavailable
from streams.memory.registry import ProviderNotConfigured
from streams.metrics import JUDGE_FALLBACKS
from tests.agents.consolidation_harness import T0, Harness
from tests.agents.fakes import FakeChatModel, FakeMemoryProvider

FIRST = [("user", "Hi! I live in Berlin. I love hiking."),
         ("assistant",
          "Berlin is lovely. Lesson learned: ask for the city before suggesting trails.")]


@pytest.fixture
def h(engine: AsyncEngine) -> Harness:
    return Harness(engine)


async def test_a_session_end_writes_facts_and_episodes_once(h: Harness) -> None:
    await h.say("c1", FIRST)
    out = await h.pipeline.run(h.closed("c1"))
    assert (out.outcome, out.judge, out.messages) == ("done", "rules", 2)
    facts = sorted(h.provider.contents("fact"))
    assert facts == ["I live in Berlin.", "I love hiking.",
                     "ask for the city before suggesting trails."]
    assert sorted(h.provider.contents("episode")) == [
        "Assistant: Berlin is lovely. Lesson learned: ask for the city before suggesting trails.",
        "User: Hi! I live in Berlin. I love hiking."]
    agent_cube = [r.cube for r in h.provider.memories.values()
                  if r.memory.content.startswith("ask for")]
    assert agent_cube == ["agent_a1"]
    assert (await h.run_row("t1/c1#1")).status == "done"

    # the same event again, and a different closing event over the same messages
    assert (await h.pipeline.run(h.closed("c1"))).outcome == "duplicate"
    assert (await h.pipeline.run(h.closed("c1", 2))).outcome == "nothing_new"
    assert len(h.provider.memories) == 5


async def test_a_session_end_takes_its_session_only_when_the_next_is_stored_already(
        h: Harness) -> None:
    # a worker catching up stores session 2 before session 1's end is consolidated
    first = await h.say("c1", FIRST)
    second = await h.say("c1", [("user", "My sister lives in Porto."),
                                ("assistant", "Porto is lovely in spring.")])
    one = h.closed("c1").model_copy(update={"last_event_id": first[-1]})
    two = h.closed("c1", 2).model_copy(update={"last_event_id": second[-1]})
    assert (await h.pipeline.run(one)).messages == 2
    assert sorted(h.provider.contents("episode")) == [
        "Assistant: Berlin is lovely. Lesson learned: ask for the city before suggesting trails.",
        "User: Hi! I live in Berlin. I love hiking."]
    assert (await h.pipeline.run(two)).messages == 2
    assert "User: My sister lives in Porto." in h.provider.contents("episode")
    # without the bound (an event from before it existed) the time bound takes both
    third = await h.say("c1", [("user", "I moved to Lisbon.")])
    fourth = await h.say("c1", [("user", "I work from home now.")])
    assert third and fourth
    assert (await h.pipeline.run(h.closed("c1", 3))).messages == 2


async def test_episodes_keep_the_message_time_and_event_id(h: Harness) -> None:
    ids = await h.say("c1", [("user", "We met at the lake.")], name="Caroline")
    await h.pipeline.run(h.closed("c1"))
    (ep,) = [r.memory for r in h.provider.memories.values() if r.memory.kind == "episode"]
    assert ep.content == "Caroline: We met at the lake."
    assert ep.source_event_ids == (ids[0],)
    assert ep.event_time is not None and ep.event_time.isoformat().startswith("2026-11-30T08:00")


async def test_only_messages_after_the_last_claim_are_new(h: Harness) -> None:
    await h.say("c1", FIRST)
    await h.pipeline.run(h.closed("c1"))
    await h.say("c1", [("user", "I work as a nurse.")])
    out = await h.pipeline.run(h.closed("c1", 2))
    assert out.messages == 1
    assert h.provider.contents("fact")[-1] == "I work as a nurse."
    assert len(h.provider.memories) == 5 + 2


async def test_messages_stored_after_the_close_wait_for_the_next_one(h: Harness) -> None:
    await h.say("c1", [("user", "I have two cats.")])
    closed = h.closed("c1")
    h.clock.advance(60)
    await h.say("c1", [("user", "I speak French.")])  # arrived a minute after the close
    out = await h.pipeline.run(closed)
    assert out.messages == 1 and h.provider.contents("fact") == ["I have two cats."]
    assert (await h.pipeline.run(h.closed("c1", 2))).messages == 1
    assert h.provider.contents("fact") == ["I have two cats.", "I speak French."]


async def test_the_same_message_under_a_new_event_id_is_not_new(h: Harness) -> None:
    first = await h.say("c1", [("user", "I have two cats.")], at=T0)
    await h.pipeline.run(h.closed("c1"))
    # the upstream re-sends the message under a fresh event id (same time and text)
    again = await h.say("c1", [("user", "I have two cats.")], at=T0)
    assert first != again
    assert (await h.pipeline.run(h.closed("c1", 2))).messages == 0
    assert h.provider.contents("fact") == ["I have two cats."]


async def test_a_newer_contradicting_fact_supersedes_and_history_stays(h: Harness) -> None:
    await h.say("c1", [("user", "I live in Berlin.")])
    await h.pipeline.run(h.closed("c1"))
    await h.say("c1", [("user", "Actually, I live in Paris now.")])
    out = await h.pipeline.run(h.closed("c1", 2))
    assert out.stats is not None and out.stats.expired == 1
    old = next(r for r in h.provider.memories.values()
               if r.memory.content == "I live in Berlin.")
    new_id = next(k for k, r in h.provider.memories.items()
                  if r.memory.content == "I live in Paris now.")
    assert old.valid is False and old.superseded_by == new_id
    assert "I live in Berlin." not in h.provider.valid("fact")
    rows = await h.runs.candidates("t1/c1#2")
    facts = [(r.action, r.expired) for r in rows if r.candidate.kind == "fact"]
    assert facts == [("supersede", True)]


async def test_a_provider_failure_resumes_without_judging_or_writing_twice(h: Harness) -> None:
    model = FakeChatModel()
    h2 = Harness(h.engine, model=model)
    model.answers = [json.dumps([{"content": "Ann lives in Berlin.", "source": [1]},
                                 {"content": "Ann loves hiking.", "type": "preference"}])]
    await h2.say("c9", FIRST)
    h2.provider.fail_adds = 1
    with pytest.raises(ProviderUnavailable):
        await h2.pipeline.run(h2.closed("c9"))
    assert (await h2.run_row("t1/c9#1")).status == "judged"
    model.answers = [ProviderTimeout("must not be asked again")]
    out = await h2.pipeline.run(h2.closed("c9"))
    assert out.outcome == "done"
    assert sorted(h2.provider.contents("fact")) == ["Ann lives in Berlin.", "Ann loves hiking."]
    assert model.purposes() == ["judge"]  # one judge call in all, no conflict call (nothing stored)


async def test_a_lost_answer_is_adopted_not_written_again(h: Harness) -> None:
    h2 = Harness(h.engine, atomic=False)
    await h2.say("c8", [("user", "I live in Oslo. I love skiing.")])
    h2.provider.lose_answers = 1  # the first add stores, then its answer is lost
    with pytest.raises(ProviderTimeout):
        await h2.pipeline.run(h2.closed("c8"))
    out = await h2.pipeline.run(h2.closed("c8"))
    assert out.stats is not None and out.stats.adopted == 1
    assert sorted(h2.provider.contents()) == [
        "I live in Oslo.", "I love skiing.", "User: I live in Oslo. I love skiing."]


async def test_a_failed_expiry_keeps_the_new_memory_and_is_swept_later(h: Harness) -> None:
    await h.say("c1", [("user", "I live in Berlin.")])
    await h.pipeline.run(h.closed("c1"))
    await h.say("c1", [("user", "Actually, I live in Paris now.")])
    h.provider.fail_expires = 1
    out = await h.pipeline.run(h.closed("c1", 2))
    assert out.outcome == "done" and out.stats is not None and out.stats.expiries_pending == 1
    assert {"I live in Berlin.", "I live in Paris now."} <= set(h.provider.valid("fact"))
    assert await h.count(cs.pending_expiry) == 1
    assert await h.sweeper.sweep() == (0, 0)  # not due yet
    h.clock.advance(31)  # the writer's first retry delay is 30 s
    assert await h.sweeper.sweep() == (1, 0)
    assert "I live in Berlin." not in h.provider.valid("fact")
    assert await h.count(cs.pending_expiry) == 0


async def test_model_failures_fall_back_to_the_rule_judge(h: Harness) -> None:
    before = JUDGE_FALLBACKS.labels("unparseable")._value.get()
    model = FakeChatModel("I cannot answer that.")
    h2 = Harness(h.engine, model=model)
    await h2.say("c7", [("user", "I live in Lima.")])
    out = await h2.pipeline.run(h2.closed("c7"))
    assert out.judge == "rules" and h2.provider.contents("fact") == ["I live in Lima."]
    assert JUDGE_FALLBACKS.labels("unparseable")._value.get() == before + 1


async def test_one_conflict_call_per_cube_batch_and_only_with_stored_memories(h: Harness) -> None:
    model = FakeChatModel()
    h2 = Harness(h.engine, model=model)
    model.answers = [json.dumps([{"content": "I live in Berlin.", "source": 1},
                                 {"content": "I like tea.", "type": "preference", "source": 1}])]
    await h2.say("c6", [("user", "I live in Berlin and I like tea.")])
    await h2.pipeline.run(h2.closed("c6"))
    assert model.purposes() == ["judge"]
    old = {r.memory.content: k for k, r in h2.provider.memories.items()}
    model.answers = [
        json.dumps([{"content": "I live in Paris.", "source": 1},
                    {"content": "I like green tea.", "source": 1, "type": "preference"}]),
        json.dumps([{"index": 1, "action": "supersede", "expire_ids": [old["I live in Berlin."]]},
                    {"index": 2, "action": "supersede", "expire_ids": [old["I like tea."]]}]),
    ]
    await h2.say("c6", [("user", "I moved to Paris, and these days I like green tea.")])
    await h2.pipeline.run(h2.closed("c6", 2))
    assert model.purposes() == ["judge", "judge", "conflict"]
    assert sorted(h2.provider.valid("fact")) == ["I like green tea.", "I live in Paris."]


async def test_long_memory_off_claims_but_writes_nothing(engine: AsyncEngine) -> None:
    cfg = {("t1", "a1"): {"long_memory_provider": "MYSQL", "open_long_memory": False}}
    h = Harness(engine, configs=cfg)
    await h.say("c1", FIRST)
    assert (await h.pipeline.run(h.closed("c1"))).outcome == "skipped"
    assert h.provider.memories == {}
    assert (await h.run_row("t1/c1#1")).status == "done"


async def test_an_agent_routed_to_an_unconfigured_provider_is_not_swapped(
    engine: AsyncEngine,
) -> None:
    cfg = {("t1", "a1"): {"long_memory_provider": "MEMOS", "open_long_memory": True,
                          "model": "m"}}
    memos = FakeMemoryProvider("memos")
    h = Harness(engine, configs=cfg)
    await h.say("c1", FIRST)
    with pytest.raises(ProviderNotConfigured):
        await h.pipeline.run(h.closed("c1"))
    assert h.provider.memories == {}
    # configured later (a replay after the fix): the claimed messages go to MemOS
    h2 = Harness(h.engine, configs=cfg, extra_providers={"memos": memos})
    assert (await h2.pipeline.run(h2.closed("c1"))).outcome == "done"
    assert sorted(memos.contents()) == ["I live in Berlin.", "I love hiking.",
                                        "ask for the city before suggesting trails."]
    assert h.provider.memories == {}


async def test_a_summary_after_twenty_uncovered_messages(h: Harness) -> None:
    lines = [("user" if i % 2 == 0 else "assistant",
              f"I have {i} apples." if i % 2 == 0 else f"Noted {i}.") for i in range(22)]
    await h.say("c1", lines[:10])
    assert (await h.pipeline.run(h.closed("c1"))).summary is None
    await h.say("c1", lines[10:])
    assert (await h.pipeline.run(h.closed("c1", 2))).summary == "extractive"
    async with h.engine.connect() as conn:
        row = (await conn.execute(select(conversation_summary))).one()
    assert row.covered_count == 22 and "user: I have 0 apples." in row.summary
    assert h.cache.summaries[("t1", "c1")]["text"] == row.summary
    assert h.cache.summaries[("t1", "c1")]["covered_until_id"] == row.covered_until_id


async def test_a_summary_survives_redis_being_down(h: Harness) -> None:
    h.cache.failing = True
    await h.say("c1", [("user", f"I have {i} apples.") for i in range(20)])
    out = await h.pipeline.run(h.closed("c1"))
    assert out.outcome == "done" and out.summary == "extractive"
    assert h.cache.summaries == {}


async def test_each_fact_goes_to_the_user_who_said_it_not_to_the_closer(h: Harness) -> None:
    # a group chat: two users speak, a system user closes the session
    await h.say("g1", [("user", "I live in Berlin.")], user="alice")
    await h.say("g1", [("user", "I love sailing.")], user="bob")
    await h.say("g1", [("assistant", "Noted, both of you.")], user="bob")
    out = await h.pipeline.run(h.closed("g1", user="system-closer"))
    assert out.outcome == "done"
    owners = {(r.memory.content, r.cube, r.scope.user_id)
              for r in h.provider.memories.values()}
    assert ("I live in Berlin.", "user_profile", "alice") in owners
    assert ("I love sailing.", "user_profile", "bob") in owners
    assert ("User: I live in Berlin.", "user_profile", "alice") in owners
    assert ("Assistant: Noted, both of you.", "user_profile", "bob") in owners
    assert not any(user == "system-closer" for _, _, user in owners)
    rows = await h.runs.candidates("t1/g1#1")
    assert {r.user_id for r in rows} == {"alice", "bob"}


async def test_a_correction_supersedes_only_within_the_speakers_profile(h: Harness) -> None:
    await h.say("g2", [("user", "I live in Porto.")], user="alice")
    await h.say("g2", [("user", "I live in Porto.")], user="bob")
    await h.pipeline.run(h.closed("g2", user="alice"))
    await h.say("g2", [("user", "Actually I live in Lisbon now.")], user="bob")
    await h.pipeline.run(h.closed("g2", 2, user="alice"))
    valid = {(r.memory.content, r.scope.user_id)
             for r in h.provider.memories.values()
             if r.valid and r.memory.kind == "fact"}
    assert ("I live in Porto.", "alice") in valid
    assert ("I live in Porto.", "bob") not in valid
    assert ("I live in Lisbon now.", "bob") in valid


async def test_two_speakers_alike_facts_in_one_session_stay_two(h: Harness) -> None:
    # "I'm 25" and "I'm 39" are near-duplicates as text, but said by two people: neither
    # is dropped, nor ends in the other's profile
    await h.say("g3", [("user", "I'm 25 years old.")], user="alice")
    await h.say("g3", [("user", "I'm 39 years old."), ("user", "I love sailing.")], user="bob")
    await h.say("g3", [("user", "I love sailing!")], user="alice")
    await h.pipeline.run(h.closed("g3", user="bob"))
    facts = {(r.memory.content, r.scope.user_id, r.memory.source_event_ids)
             for r in h.provider.memories.values() if r.memory.kind == "fact"}
    assert {(c, u) for c, u, _ in facts} == {
        ("I'm 25 years old.", "alice"), ("I'm 39 years old.", "bob"),
        ("I love sailing.", "bob"), ("I love sailing!", "alice")}
    assert all(len(sources) == 1 for _, _, sources in facts)
