"""Stale-history marks against in-memory fakes: written before the batch is
done, honoured after a restart, cleared only after the list was dropped."""

from __future__ import annotations

import asyncio

import pytest

from streams.session.ports import SessionTable
from streams.session.rules.stale import UNKNOWN_MARK
from streams.session.stale import HEAL_PER_WRITE, StaleHistories
from streams.stores import CacheUnavailable
from streams.testing.ingest import InMemoryMessageStore
from streams.testing.outbox import RecordingPublisher
from streams.testing.session import InMemoryHotCopy, InMemorySessionTable, InMemoryStaleMarks
from tests.agents.test_ingest_processor import SETTINGS, ev, recs
from tests.support.wiring import ingest_processor

C1, C2 = ("t1", "c1"), ("t1", "c2")


class Parts:
    def __init__(self, marks: InMemoryStaleMarks | None = None,
                 table: SessionTable | None = None) -> None:
        self.cache = InMemoryHotCopy()
        self.marks = marks or InMemoryStaleMarks()
        self.stale = StaleHistories(self.cache, self.marks,
                                    retry_initial_s=0.001, retry_max_s=0.002)
        self.store = InMemoryMessageStore()
        self.proc = ingest_processor(self.store, self.cache, RecordingPublisher(),
                                     table or InMemorySessionTable(), stale=self.stale,
                                     settings=SETTINGS)

    def ids(self, key: tuple[str, str]) -> list[str]:
        return [d["event_id"] for d in self.cache.lists.get(key, [])]


@pytest.fixture
def p() -> Parts:
    return Parts()


async def test_an_event_twice_in_one_batch_is_appended_once(p: Parts) -> None:
    res = await p.proc.process(recs([ev(0), ev(1), ev(0), ev(1), ev(2)]))
    assert (res.stored, res.duplicates) == (3, 2)
    assert p.ids(C1) == ["c1-2", "c1-1", "c1-0"]
    assert C1 not in p.cache.invalidated  # nothing was stored before: the list stays


async def test_a_failed_redis_write_is_marked_before_the_batch_is_done(p: Parts) -> None:
    await p.proc.process(recs([ev(0), ev(0, conv="c2")]))
    p.cache.failing = True
    res = await p.proc.process(recs([ev(1), ev(1, conv="c2"), ev(0)], start=2))
    assert not res.cache_ok
    assert set(p.marks.marks) == {C1, C2}  # c1 was also redelivered (ev 0): marked all the same
    assert C1 in p.stale.held and C2 in p.stale.held


async def test_a_database_failure_while_marking_is_retried_until_the_mark_is_stored(
    p: Parts,
) -> None:
    p.cache.failing = True
    p.marks.fail_next = 3
    task = asyncio.create_task(p.proc.process(recs([ev(0)])))
    res = await asyncio.wait_for(task, 5)
    assert not res.cache_ok and len(p.store.rows) == 1
    assert p.marks.calls == 4 and set(p.marks.marks) == {C1}


async def test_a_stale_list_is_dropped_not_appended_to_then_its_mark_cleared(p: Parts) -> None:
    await p.proc.process(recs([ev(0)]))
    p.cache.failing = True
    await p.proc.process(recs([ev(1)], start=1))
    assert p.ids(C1) == ["c1-0"]  # Redis missed message 1
    p.cache.failing = False
    await p.proc.process(recs([ev(2)], start=2))
    assert C1 not in p.cache.lists  # dropped: the next read rebuilds it from the database
    assert p.marks.marks == {} and len(p.stale.held) == 0
    await p.proc.process(recs([ev(3)], start=3))
    assert C1 not in p.cache.lists  # appended only to a list that exists (LPUSHX)


async def test_marks_left_by_a_previous_process_are_honoured_after_a_restart(p: Parts) -> None:
    await p.proc.process(recs([ev(0), ev(0, conv="c2")]))
    p.cache.failing = True
    await p.proc.process(recs([ev(1)], start=2))
    assert set(p.marks.marks) == {C1}
    # the process dies; the next one starts on the same database and (recovered) Redis
    again = Parts(p.marks, p.proc.table)
    again.cache.lists = p.cache.lists
    again.store.rows = p.store.rows
    assert await again.stale.sync() == 1
    await again.proc.process(recs([ev(2), ev(1, conv="c2")], start=3))
    assert C1 not in again.cache.lists and again.ids(C2) == ["c2-1", "c2-0"]
    assert again.marks.marks == {}


async def test_a_mark_written_again_meanwhile_is_not_cleared(p: Parts) -> None:
    p.cache.failing = True
    await p.proc.process(recs([ev(0)]))
    p.marks.marks[C1] = 99  # another worker failed on c1 after this one
    p.cache.failing = False
    await p.proc.process(recs([ev(1)], start=1))
    assert p.marks.marks == {C1: 99}
    assert (entry := p.stale.held.get(C1)) is not None and entry.mark_id == 99
    await p.proc.process(recs([ev(2)], start=2))  # dropped again, now its mark goes
    assert p.marks.marks == {} and len(p.stale.held) == 0


async def test_a_write_heals_stale_conversations_it_does_not_touch(p: Parts) -> None:
    p.cache.failing = True
    await p.proc.process(recs([ev(i, conv=f"x{i}") for i in range(HEAL_PER_WRITE + 5)]))
    p.cache.failing = False
    await p.proc.process(recs([ev(0, conv="new")], start=10_000))
    assert len(p.marks.marks) == 5 and len(p.stale.held) == 5  # at most HEAL_PER_WRITE a write
    await p.proc.process(recs([ev(1, conv="new")], start=10_001))
    assert p.marks.marks == {} and len(p.stale.held) == 0


async def test_a_failed_clear_keeps_marks_and_entries(p: Parts) -> None:
    p.cache.failing = True
    await p.proc.process(recs([ev(0)]))
    p.cache.failing = False
    p.marks.fail_next = 1
    await p.proc.process(recs([ev(1)], start=1))  # the clear fails: logged, batch done
    assert set(p.marks.marks) == {C1} and C1 in p.stale.held
    await p.proc.process(recs([ev(2)], start=2))
    assert p.marks.marks == {} and len(p.stale.held) == 0


async def test_sync_forgets_entries_whose_mark_someone_else_cleared(p: Parts) -> None:
    p.cache.failing = True
    await p.proc.process(recs([ev(0), ev(0, conv="c2")]))
    del p.marks.marks[C1]  # a reader rebuilt c1 and cleared its mark
    assert await p.stale.sync() == 1
    assert C1 not in p.stale.held and C2 in p.stale.held


async def test_lookup_sees_held_marks_and_stored_ones() -> None:
    p = Parts()
    p.marks.marks[C2] = 5
    p.stale.held.begin([C1])  # a mark being written by this process
    held, stored, clean = [await p.stale.lookup(*k) for k in (C1, C2, ("t1", "c3"))]
    assert (held.stale, held.mark) == (True, None)
    assert stored.stale and stored.mark is not None and stored.mark.mark_id == 5
    assert not clean.stale and clean.checked
    p.marks.fail_next = 2
    blind_held, blind = [await p.stale.lookup(*k) for k in (C1, C2)]
    assert (blind_held.stale, blind_held.checked) == (True, False)
    assert (blind.stale, blind.checked) == (False, False)


async def test_rebuilt_clears_the_mark_it_read_only(p: Parts) -> None:
    p.marks.marks[C1] = 5
    seen = await p.stale.lookup(*C1)
    p.marks.marks[C1] = 6  # marked again after the reader read the database
    await p.stale.rebuilt(seen)
    assert p.marks.marks == {C1: 6}
    await p.stale.rebuilt(await p.stale.lookup(*C1))
    assert p.marks.marks == {}


async def test_a_redis_failure_still_raises_after_marking(p: Parts) -> None:
    p.cache.failing = True
    with pytest.raises(CacheUnavailable):
        await p.stale.write({C1: [{"event_id": "e"}]}, (), ())
    assert set(p.marks.marks) == {C1}



async def test_an_interrupted_mark_write_stays_held_until_a_clear_finds_out(p: Parts) -> None:
    p.cache.failing = True
    p.marks.fail_next = 10_000  # the database does not answer
    task = asyncio.create_task(p.stale.write({C1: [{"event_id": "e1"}]}, (), ()))
    await asyncio.sleep(0.05)
    task.cancel()  # shutdown: the batch is not acknowledged
    with pytest.raises(asyncio.CancelledError):
        await task
    entry = p.stale.held.get(C1)
    assert entry is not None and entry.mark_id == UNKNOWN_MARK  # still kept away from
    p.cache.failing, p.marks.fail_next = False, 0
    await p.stale.write({C2: [{"event_id": "e2"}]}, (), ())
    assert C1 in p.cache.invalidated and len(p.stale.held) == 0  # dropped; no mark was stored


async def test_a_database_that_does_not_answer_does_not_hold_cached_reads_up() -> None:
    class HangingMarks(InMemoryStaleMarks):
        async def get(self, tenant_id: str, conversation_id: str) -> None:
            await asyncio.sleep(3600)

    stale = StaleHistories(InMemoryHotCopy(), HangingMarks(),
                           lookup_timeout_s=0.01)
    stale.held.begin([C1])
    held, other = await asyncio.wait_for(
        asyncio.gather(stale.lookup(*C1), stale.lookup(*C2)), 1.0)
    assert (held.stale, held.checked) == (True, False)
    assert (other.stale, other.checked) == (False, False)


async def test_a_list_read_without_the_databases_word_is_served_with_a_warning() -> None:
    """A mark another worker stored cannot be seen while the database does not answer:
    the list is served then, but never as verified — the reply says so."""
    from streams.query.engine import QueryConfig, QueryEngine
    from streams.session.reader import SessionReader
    from streams.wire.query import MemoryQuery

    class HangingMarks(InMemoryStaleMarks):
        async def get(self, tenant_id: str, conversation_id: str) -> None:
            await asyncio.sleep(3600)

    class NoLog:
        async def recent(self, tenant_id: str, conversation_id: str,
                         limit: int) -> list[dict[str, object]]:
            return []

        async def summary(self, tenant_id: str, conversation_id: str) -> None:
            return None

    def docs(marks: InMemoryStaleMarks) -> SessionReader:
        cache = InMemoryHotCopy()
        cache.lists[C1] = [{"event_id": "e1", "role": "user", "user_id": "u1",
                            "content": "hello", "created_at": "2026-11-30T08:00:00+00:00"}]
        return SessionReader(NoLog(), cache, lambda text: len(text.split()),  # type: ignore[arg-type]
                             stale=StaleHistories(cache, marks, lookup_timeout_s=0.01))

    query = MemoryQuery.model_validate({"tenant_id": "t1", "user_id": "u1", "agent_id": "a1",
                                        "conversation_id": "c1", "message": "hi"})
    for marks, warned in ((InMemoryStaleMarks(), False), (HangingMarks(), True)):
        reader = docs(marks)
        window = await reader.window(*C1)
        assert [m["content"] for m in window.messages] == ["hello"]
        assert (window.source, window.unverified) == ("cache", warned)
        engine = QueryEngine(QueryConfig(default_long_memory=False), reader,
                             type("NoConfigs", (), {"get": lambda *a: None})(),
                             None, lambda text: len(text.split()))  # type: ignore[arg-type]
        reply = await engine.answer(query)
        codes = [w.code for w in reply.warnings]
        assert ("short_term_unverified" in codes) is warned, codes
