"""memstream reprocess on SQLite with the in-memory provider (a provider whose
``add`` makes new ids, as MemOS and Mem0 do): sessions rebuilt as runs of their
own, new memories written before the old ones are retired, resumable, dry run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.schema import consolidation as cs
from streams.adapters.db.schema import reprocess as rp
from streams.consolidation.reprocess import ReprocessRequest
from tests.agents.consolidation_harness import T0, Harness, sqlite_engine

S1 = [("user", "I live in Berlin. I love hiking."), ("assistant", "Berlin has good trails.")]
S2 = [("user", "My sister lives in Porto."), ("assistant", "Porto is lovely.")]


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    e = await sqlite_engine(tmp_path)
    yield e
    await e.dispose()


async def live(h: Harness, conv: str = "c1", user: str = "u1") -> None:
    await h.say(conv, S1, seq=1, user=user)
    await h.pipeline.run(h.closed(conv, 1, user=user))
    await h.say(conv, S2, seq=2, user=user, at=T0 + timedelta(hours=3))
    await h.pipeline.run(h.closed(conv, 2, user=user))


def valid_ids(h: Harness) -> dict[str, str]:
    return {mid: r["memory"].content for mid, r in h.provider.memories.items() if r["valid"]}


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
    job, resumed = await reprocessor.start(ReprocessRequest("t1"))
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
    assert (report.sessions, report.messages, report.written, report.retired) == (2, 4, 6, 6)
    assert (await reprocessor.store.job(job.job_id)).status == "done"  # type: ignore[union-attr]


async def test_a_second_job_replaces_the_first_jobs_memories_and_nothing_else(
        engine: AsyncEngine) -> None:
    h = Harness(engine)
    await live(h, "c1", "u1")
    await live(h, "c2", "u2")
    other = {mid for mid, r in h.provider.memories.items() if r["scope"].user_id == "u2"}
    reprocessor = h.wiring.reprocessor()
    for _ in range(2):
        job, resumed = await reprocessor.start(ReprocessRequest("t1", user_id="u1"))
        assert not resumed and job.sessions == 2
        await reprocessor.run(job)
    mine = [r["memory"].content for r in h.provider.memories.values()
            if r["valid"] and r["scope"].user_id == "u1"]
    assert len(mine) == 6 and len(set(mine)) == 6  # no doubles after two jobs
    assert all(h.provider.memories[m]["valid"] for m in other)  # u2 untouched
    theirs = [r for r in h.provider.memories.values() if r["scope"].user_id == "u2"]
    assert len(theirs) == len(other)


async def test_an_interrupted_job_resumes_where_it_stopped(engine: AsyncEngine) -> None:
    h = Harness(engine)
    await live(h)
    before = sorted(valid_ids(h).values())
    reprocessor = h.wiring.reprocessor()
    job, _ = await reprocessor.start(ReprocessRequest("t1"))
    h.provider.fail_adds = 1
    h.provider.permanent = True
    with pytest.raises(Exception, match="fake add failed"):
        await reprocessor.run(job)
    # nothing retired yet: the old memories still answer
    assert sorted(set(valid_ids(h).values())) == before
    h.provider.permanent = False
    again, resumed = await reprocessor.start(ReprocessRequest("t1"))
    assert resumed and again.job_id == job.job_id
    await reprocessor.run(again)
    assert sorted(valid_ids(h).values()) == before


async def test_since_rebuilds_only_the_later_sessions(engine: AsyncEngine) -> None:
    h = Harness(engine)
    await live(h)
    first = {mid for mid, r in h.provider.memories.items()
             if "Berlin" in r["memory"].content or "hiking" in r["memory"].content}
    reprocessor = h.wiring.reprocessor()
    job, _ = await reprocessor.start(ReprocessRequest("t1", since=T0 + timedelta(hours=2)))
    assert job.sessions == 1
    report = await reprocessor.run(job)
    assert report.retired == 2
    assert all(h.provider.memories[m]["valid"] for m in first)


async def test_a_dry_run_says_what_would_change_and_writes_nothing(
        engine: AsyncEngine) -> None:
    h = Harness(engine)
    await live(h)
    held = dict(h.provider.memories)
    async with engine.connect() as conn:
        runs = (await conn.execute(select(func.count()).select_from(cs.consolidation_run))
                ).scalar_one()
    preview = await h.wiring.reprocessor().preview(ReprocessRequest("t1"))
    assert (preview.sessions, preview.messages, preview.conversations, preview.replaced) == (
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
    job, _ = await h.wiring.reprocessor().start(ReprocessRequest("t1"))
    assert job.sessions == 2


async def test_a_fact_the_old_judge_worded_otherwise_is_written_not_skipped(
        engine: AsyncEngine) -> None:
    h = Harness(engine)
    await live(h)
    # as an earlier judge would have put it: the same fact, other words and sources
    for row in h.provider.memories.values():
        if row["memory"].content == "I live in Berlin.":
            row["memory"] = replace(row["memory"], content="I live in Berlin, Germany.",
                                    source_event_ids=())
    reprocessor = h.wiring.reprocessor()
    job, _ = await reprocessor.start(ReprocessRequest("t1"))
    await reprocessor.run(job)
    facts = sorted(r["memory"].content for r in h.provider.memories.values()
                   if r["valid"] and r["memory"].kind == "fact")
    # the rebuilt fact is not taken for a duplicate of the one it replaces
    assert facts == ["I live in Berlin.", "I love hiking."]
