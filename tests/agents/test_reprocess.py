"""memstream reprocess on SQLite with the in-memory provider (a provider whose
``add`` makes new ids, as MemOS and Mem0 do): sessions rebuilt as runs of their
own, new memories written before the old ones are retired, resumable, dry run."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.schema import consolidation as cs
from streams.adapters.db.schema import reprocess as rp
from streams.consolidation.reprocess import JobConflict, ReprocessRequest
from streams.memory.registry import ProviderNotConfigured
from tests.agents.consolidation_harness import T0, Harness

S1 = [("user", "I live in Berlin. I love hiking."), ("assistant", "Berlin has good trails.")]
S2 = [("user", "My sister lives in Porto."), ("assistant", "Porto is lovely.")]


async def live(h: Harness, conv: str = "c1", user: str = "u1") -> None:
    await h.say(conv, S1, seq=1, user=user)
    await h.pipeline.run(h.closed(conv, 1, user=user))
    await h.say(conv, S2, seq=2, user=user, at=T0 + timedelta(hours=3))
    await h.pipeline.run(h.closed(conv, 2, user=user))


def valid_ids(h: Harness) -> dict[str, str]:
    return {mid: r.memory.content for mid, r in h.provider.memories.items() if r.valid}


async def test_sessions_are_rebuilt_and_the_old_memories_retired_without_a_gap(
        engine: AsyncEngine) -> None:
    h = Harness(engine)
    await live(h)
    before = valid_ids(h)
    assert sorted(before.values()) == sorted([
        "I live in Berlin.", "I love hiking.",  # the sister's fact is her episode's
        "User: I live in Berlin. I love hiking.", "Assistant: Berlin has good trails.",
        "User: My sister lives in Porto.", "Assistant: Porto is lovely."])
    reprocessor = h.wiring.reprocessor()
    job, resumed, _ = await reprocessor.start(ReprocessRequest("t1"))
    assert job is not None
    assert not resumed and job.sessions == 2
    seen: list[list[str]] = []

    def progress(done: int, total: int) -> None:
        # at every step each memory is held under an old or a new id: never a gap
        seen.append(sorted(set(valid_ids(h).values())))

    report = await reprocessor.run(job, progress)
    assert all(step == sorted(before.values()) for step in seen) and len(seen) == 3
    after = valid_ids(h)
    assert sorted(after.values()) == sorted(before.values())
    assert not set(after) & set(before)  # all written again, the old ones retired
    assert (report.sessions, report.messages, report.written, report.kept, report.retired) == (
        2, 4, 6, 0, 6)
    done = await reprocessor.store.job(job.job_id)
    assert done is not None and done.status == "done"


async def test_a_second_job_replaces_the_first_jobs_memories_and_nothing_else(
        engine: AsyncEngine) -> None:
    h = Harness(engine)
    await live(h, "c1", "u1")
    await live(h, "c2", "u2")
    other = {mid for mid, r in h.provider.memories.items() if r.scope.user_id == "u2"}
    reprocessor = h.wiring.reprocessor()
    for _ in range(2):
        job, resumed, _ = await reprocessor.start(ReprocessRequest("t1", user_id="u1"))
        assert job is not None
        assert not resumed and job.sessions == 2
        await reprocessor.run(job)
    mine = [r.memory.content for r in h.provider.memories.values()
            if r.valid and r.scope.user_id == "u1"]
    assert len(mine) == 6 and len(set(mine)) == 6  # no doubles after two jobs
    assert all(h.provider.memories[m].valid for m in other)  # u2 untouched
    theirs = [r for r in h.provider.memories.values() if r.scope.user_id == "u2"]
    assert len(theirs) == len(other)


async def test_an_interrupted_job_resumes_where_it_stopped(engine: AsyncEngine) -> None:
    h = Harness(engine)
    await live(h)
    before = sorted(valid_ids(h).values())
    reprocessor = h.wiring.reprocessor()
    job, _, _ = await reprocessor.start(ReprocessRequest("t1"))
    assert job is not None
    h.provider.fail_adds = 1
    h.provider.permanent = True
    with pytest.raises(Exception, match="fake add failed"):
        await reprocessor.run(job)
    # nothing retired yet: the old memories still answer
    assert sorted(set(valid_ids(h).values())) == before
    h.provider.permanent = False
    again, resumed, _ = await reprocessor.start(ReprocessRequest("t1"))
    assert again is not None
    assert resumed and again.job_id == job.job_id
    await reprocessor.run(again)
    assert sorted(valid_ids(h).values()) == before


async def test_since_rebuilds_only_the_later_sessions(engine: AsyncEngine) -> None:
    h = Harness(engine)
    await live(h)
    first = {mid for mid, r in h.provider.memories.items()
             if "Berlin" in r.memory.content or "hiking" in r.memory.content}
    reprocessor = h.wiring.reprocessor()
    job, _, _ = await reprocessor.start(ReprocessRequest("t1", since=T0 + timedelta(hours=2)))
    assert job is not None
    assert job.sessions == 1
    report = await reprocessor.run(job)
    assert report.retired == 2
    assert all(h.provider.memories[m].valid for m in first)


async def test_a_dry_run_says_what_would_change_and_writes_nothing(
        engine: AsyncEngine) -> None:
    h = Harness(engine)
    await live(h)
    held = dict(h.provider.memories)
    async with engine.connect() as conn:
        runs = (await conn.execute(select(func.count()).select_from(cs.consolidation_run))
                ).scalar_one()
    preview = await h.wiring.reprocessor().preview(ReprocessRequest("t1"))
    assert (preview.sessions, preview.messages, preview.conversations, preview.held) == (
        2, 4, 1, 6)
    assert {c["content"] for c in preview.candidates if c["kind"] == "fact"} == {
        "I live in Berlin.", "I love hiking."}
    assert h.provider.memories == held
    async with engine.connect() as conn:
        assert (await conn.execute(select(func.count()).select_from(cs.consolidation_run))
                ).scalar_one() == runs
        assert (await conn.execute(select(func.count()).select_from(rp.reprocess_job))
                ).scalar_one() == 0


async def test_an_open_session_is_left_to_the_live_path(engine: AsyncEngine) -> None:
    h = Harness(engine)
    await live(h)
    await h.say("c1", [("user", "I have a cat.")], seq=3, at=T0 + timedelta(hours=6))
    job, _, _ = await h.wiring.reprocessor().start(ReprocessRequest("t1"))
    assert job is not None
    assert job.sessions == 2


async def test_a_fact_the_old_judge_worded_otherwise_is_written_not_skipped(
        engine: AsyncEngine) -> None:
    h = Harness(engine)
    await live(h)
    # as an earlier judge would have put it: the same fact, other words and sources
    for row in h.provider.memories.values():
        if row.memory.content == "I live in Berlin.":
            row.memory = replace(row.memory, content="I live in Berlin, Germany.",
                                 source_event_ids=())
    reprocessor = h.wiring.reprocessor()
    job, _, _ = await reprocessor.start(ReprocessRequest("t1"))
    assert job is not None
    await reprocessor.run(job)
    facts = sorted(r.memory.content for r in h.provider.memories.values()
                   if r.valid and r.memory.kind == "fact")
    # the rebuilt fact is not taken for a duplicate of the one it replaces
    assert facts == ["I live in Berlin.", "I love hiking."]


async def test_a_tenant_has_one_unfinished_job_at_a_time(engine: AsyncEngine) -> None:
    h = Harness(engine)
    await live(h, "c1", "u1")
    await live(h, "c2", "u2")
    reprocessor = h.wiring.reprocessor()
    whole, _, _ = await reprocessor.start(ReprocessRequest("t1"))
    # another request while it is unfinished is refused, naming the job to finish
    assert whole is not None
    with pytest.raises(JobConflict, match=whole.job_id):
        await reprocessor.start(ReprocessRequest("t1", user_id="u1"))
    # the same request, twice at the same moment, is one job
    (a, ra, _), (b, rb, _) = await asyncio.gather(
        reprocessor.start(ReprocessRequest("t1")), reprocessor.start(ReprocessRequest("t1")))
    assert a is not None and b is not None
    assert a.job_id == b.job_id == whole.job_id and ra and rb
    # two runs of it at once: each memory retired once, counted once
    first, second = await asyncio.gather(reprocessor.run(whole), reprocessor.run(whole))
    assert first.retired == second.retired == 12
    assert len(valid_ids(h)) == 12
    # finished: another request may start
    mine, resumed, _ = await reprocessor.start(ReprocessRequest("t1", user_id="u1"))
    assert mine is not None and not resumed and mine.sessions == 2
    abandoned = await reprocessor.abandon("t1")
    assert abandoned is not None and abandoned.job_id == mine.job_id
    assert await reprocessor.abandon("t1") is None
    other, _, _ = await reprocessor.start(ReprocessRequest("t1", user_id="u2"))
    assert other is not None and other.job_id != mine.job_id


async def test_nothing_to_rebuild_records_no_job(engine: AsyncEngine) -> None:
    h = Harness(engine)
    await live(h)
    job, resumed, plan = await h.wiring.reprocessor().start(
        ReprocessRequest("t1", user_id="nobody"))
    assert (job, resumed, plan.sessions if plan else None) == (None, False, [])
    async with engine.connect() as conn:
        assert (await conn.execute(select(func.count()).select_from(rp.reprocess_job))
                ).scalar_one() == 0


async def test_a_provider_not_configured_stops_the_job_before_it_writes(
        engine: AsyncEngine) -> None:
    h = Harness(engine)
    await live(h)
    async with engine.begin() as conn:  # one memory is held by a provider not configured here
        await conn.execute(update(cs.memory_origin).where(
            cs.memory_origin.c.memory_id == "m1").values(provider="memos"))
    reprocessor = h.wiring.reprocessor()
    job, _, _ = await reprocessor.start(ReprocessRequest("t1"))
    assert job is not None
    held = dict(h.provider.memories)
    with pytest.raises(ProviderNotConfigured, match=r"memos.*abandon"):
        await reprocessor.run(job)
    assert h.provider.memories == held
    abandoned = await reprocessor.abandon("t1")
    assert abandoned is not None and abandoned.job_id == job.job_id


async def test_a_message_published_twice_is_rebuilt_once(engine: AsyncEngine) -> None:
    h = Harness(engine)
    at = T0 + timedelta(hours=1)
    await h.say("c1", [("user", "I have two cats.")], seq=1, at=at)
    await h.say("c1", [("user", "I have two cats.")], seq=1, at=at)  # another event id
    await h.pipeline.run(h.closed("c1", 1))
    assert h.provider.valid("episode") == ["User: I have two cats."]
    reprocessor = h.wiring.reprocessor()
    job, _, _ = await reprocessor.start(ReprocessRequest("t1"))
    assert job is not None
    await reprocessor.run(job)
    assert h.provider.valid("episode") == ["User: I have two cats."]
    assert h.provider.valid("fact") == ["I have two cats."]


async def test_a_conversation_whose_live_run_is_unfinished_is_left_out(
        engine: AsyncEngine) -> None:
    h = Harness(engine)
    await live(h, "c1")
    await live(h, "c2")
    async with engine.begin() as conn:  # c2's last run is still being retried
        await conn.execute(update(cs.consolidation_run).where(
            cs.consolidation_run.c.closed_id == "t1/c2#2").values(status="judged"))
    job, _, plan = await h.wiring.reprocessor().start(ReprocessRequest("t1"))
    assert job is not None and job.sessions == 2 and plan is not None
    assert plan.busy == ["c2"]


async def test_a_superseded_memory_is_retired_in_its_origin_and_not_replaced_again(
        engine: AsyncEngine) -> None:
    h = Harness(engine)
    await h.say("c1", [("user", "I live in Porto.")], seq=1)
    await h.pipeline.run(h.closed("c1", 1))
    await h.say("c1", [("user", "Actually I live in Lisbon now.")], seq=2,
                at=T0 + timedelta(hours=3))
    await h.pipeline.run(h.closed("c1", 2))
    porto = next(m for m, r in h.provider.memories.items()
                 if r.memory.content == "I live in Porto.")
    async with engine.connect() as conn:
        retired = (await conn.execute(select(cs.memory_origin.c.retired_at).where(
            cs.memory_origin.c.memory_id == porto))).scalar_one()
    assert retired is not None
    reprocessor = h.wiring.reprocessor()
    job, _, _ = await reprocessor.start(ReprocessRequest("t1"))
    assert job is not None
    report = await reprocessor.run(job)
    assert report.retired == 3  # the Lisbon fact and both episodes; Porto was gone already
    assert sorted(h.provider.valid("fact")) == ["I live in Lisbon now."]
