"""A session longer than one run takes is consolidated in bounded parts, each its own
resumable run: every message once, whatever stops where."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.schema import consolidation as cs
from streams.memory.provider import ProviderUnavailable
from streams.wire.records import SessionClosed
from tests.agents.consolidation_harness import Harness

L = cs.consolidation_ledger.c


def chat(n: int, start: int = 0) -> list[tuple[str, str]]:
    return [("user" if i % 2 == 0 else "assistant", f"Line {i:03d} of the long talk.")
            for i in range(start, start + n)]


def episodes(h: Harness) -> Counter[str]:
    return Counter(e for r in h.provider.memories.values() if r.memory.kind == "episode"
                   for e in r.memory.source_event_ids)


async def claimed(h: Harness) -> dict[str, int]:
    """Ledger rows per run."""
    async with h.engine.connect() as conn:
        rows = (await conn.execute(select(L.closed_id, func.count()).group_by(L.closed_id))).all()
    return {r[0]: int(r[1]) for r in rows}


async def all_parts(h: Harness, closed: SessionClosed | None) -> list[tuple[str, int]]:
    """Run a closing event and every part it hands on; (closed_id, messages) of each."""
    done = []
    while closed is not None:
        out = await h.pipeline.run(closed)
        done.append((closed.closed_id, out.messages))
        closed = out.next
    return done


async def test_a_long_session_goes_in_parts_of_at_most_max_messages(engine: AsyncEngine) -> None:
    h = Harness(engine, consolidation={"max_messages": 10, "write_chunk": 4})
    sizes: list[int] = []
    add = h.provider.add

    async def counting(scope: Any, cube: str, memories: Any) -> Any:
        sizes.append(len(memories))
        return await add(scope, cube, memories)

    h.provider.add = counting  # type: ignore[method-assign]
    ids = await h.say("c1", chat(25), seq=1)
    parts = await all_parts(h, h.closed("c1"))
    assert parts == [("t1/c1#1", 10), ("t1/c1#1+2", 10), ("t1/c1#1+3", 5)]
    assert episodes(h) == Counter(ids)
    assert await claimed(h) == {"t1/c1#1": 10, "t1/c1#1+2": 10, "t1/c1#1+3": 5}
    assert sizes and max(sizes) <= 4  # provider writes in chunks
    for closed_id, _ in parts:
        assert (await h.run_row(closed_id)).status == "done"

    # every part again (redelivered): nothing more, and no part handed on twice
    again = h.closed("c1")
    out = await h.pipeline.run(again)
    assert (out.outcome, out.next) == ("duplicate", None)
    for n in (2, 3):
        part = again.model_copy(update={"closed_id": f"t1/c1#1+{n}", "part": n})
        assert (await h.pipeline.run(part)).outcome == "duplicate"
    # a part nobody handed on (after the last one) claims nothing
    stray = again.model_copy(update={"closed_id": "t1/c1#1+4", "part": 4})
    assert (await h.pipeline.run(stray)).messages == 0
    assert episodes(h) == Counter(ids)


async def test_a_part_takes_at_most_max_bytes_and_a_longer_message_alone(
        engine: AsyncEngine) -> None:
    h = Harness(engine, consolidation={"max_bytes": 100})
    lines = [("user", "a" * 40), ("assistant", "b" * 40), ("user", "c" * 40),
             ("assistant", "d" * 300), ("user", "e" * 10)]
    ids = await h.say("c1", lines, seq=1)
    parts = await all_parts(h, h.closed("c1"))
    assert [n for _, n in parts] == [2, 1, 1, 1]
    assert episodes(h) == Counter(ids)


async def test_a_crash_inside_a_part_or_before_the_next_is_sent_loses_and_doubles_nothing(
        engine: AsyncEngine) -> None:
    h = Harness(engine, consolidation={"max_messages": 4})
    ids = await h.say("c1", chat(10), seq=1)
    first = await h.pipeline.run(h.closed("c1"))
    assert first.next is not None and first.next.closed_id == "t1/c1#1+2"
    # the worker died after part 1 was done, before part 2 was sent: the redelivered
    # event hands part 2 on again
    again = await h.pipeline.run(h.closed("c1"))
    assert again.outcome == "duplicate" and again.next == first.next

    # part 2 claimed and judged, then its writes fail (the worker dies mid-part)
    h.provider.fail_adds = 1
    try:
        await h.pipeline.run(first.next)
    except ProviderUnavailable:
        pass
    else:
        raise AssertionError("the write should have failed")
    assert (await h.run_row("t1/c1#1+2")).status == "judged"
    # once part 2's run exists, its own event carries on: part 1 hands nothing on
    assert (await h.pipeline.run(h.closed("c1"))).next is None
    rest = await all_parts(h, first.next)
    assert rest == [("t1/c1#1+2", 4), ("t1/c1#1+3", 2)]
    assert episodes(h) == Counter(ids)
    assert sum((await claimed(h)).values()) == 10


async def test_the_next_session_claimed_between_two_parts_takes_nothing_of_them(
        engine: AsyncEngine) -> None:
    h = Harness(engine, consolidation={"max_messages": 4})
    one = await h.say("c1", chat(9), seq=1)
    two = await h.say("c1", chat(3, 100), seq=2)
    first = await h.pipeline.run(h.closed("c1"))
    assert first.messages == 4 and first.next is not None
    # session 2's end comes before session 1's part 2 (it was sent after it)
    assert [n for _, n in await all_parts(h, h.closed("c1", 2))] == [3]
    assert [n for _, n in await all_parts(h, first.next)] == [4, 1]
    assert episodes(h) == Counter(one + two)


async def test_unstamped_and_late_messages_are_bounded_too(engine: AsyncEngine) -> None:
    h = Harness(engine, consolidation={"max_messages": 4})
    # messages stored before sessions were stamped: the earlier rule, in parts
    legacy = await h.say("c1", chat(9))
    closed = h.closed("c1").model_copy(update={"last_event_id": legacy[-1]})
    assert [n for _, n in await all_parts(h, closed)] == [4, 4, 1]
    # a late closing event for many messages of a session consolidated before
    stamped = await h.say("c2", chat(2), seq=1)
    await all_parts(h, h.closed("c2"))
    late = await h.say("c2", chat(7, 50), seq=1)
    event = h.closed("c2", trigger="late").model_copy(update={"closed_id": "t1/c2#1~abc"})
    parts = await all_parts(h, event)
    assert parts == [("t1/c2#1~abc", 4), ("t1/c2#1~abc+2", 3)]
    assert episodes(h) == Counter(legacy + stamped + late)


async def test_the_processor_sends_the_next_part_on_the_closing_topic(
        engine: AsyncEngine) -> None:
    h = Harness(engine, consolidation={"max_messages": 3})
    ids = await h.say("c1", chat(5), seq=1)
    (handled,) = await h.processor.process([h.record(h.closed("c1"))])
    assert handled.outcome == "done"
    (sent,) = h.publisher.on("closed")
    nxt = SessionClosed.model_validate_json(sent.value or b"")
    assert sent.key == b"c1" and (nxt.closed_id, nxt.part) == ("t1/c1#1+2", 2)
    assert not h.publisher.on("retry")
    last = await h.processor.handle(h.record(nxt, offset=1))
    assert last.outcome == "done" and last.forward is None
    assert len(h.publisher.on("closed")) == 1
    assert episodes(h) == Counter(ids)
