"""Waits that release (SQLite, the real pipeline and processor): a run waiting for a
cube's lock holds no slot, one tenant's backlog holds at most its share of the
slots, and no cube lock is held while the conflict model is asked."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from streams.consolidation.slots import TenantSlots
from streams.memory.model import USER_CUBE, MemoryCandidate, cube_key
from streams.memory.provider import Scope
from streams.testing.memory import FakeChatModel
from tests.agents.consolidation_harness import Harness
from tests.support.worker import eventually

Peaks = list[tuple[int, dict[str, int]]]
LOUD = ["I live in Rome.", "My dog is called Rex.", "I work at Acme."]


def watch(slots: TenantSlots) -> Peaks:
    """Every allotment of ``slots``: slots in use, and by tenant."""
    seen: Peaks = []
    dispatch = slots._dispatch

    def watched() -> None:
        dispatch()
        seen.append((slots.in_use, dict(slots.running)))

    slots._dispatch = watched  # type: ignore[method-assign]
    return seen


async def _said(h: Harness, tenant: str, user: str, conv: str, fact: str) -> Any:
    await h.say(conv, [("user", fact)], tenant=tenant, user=user)
    return h.record(h.closed(conv, tenant=tenant, user=user))


async def _status(h: Harness, closed_id: str) -> str | None:
    row = await h.run_row(closed_id)
    return None if row is None else str(row.status)


async def test_a_cube_held_elsewhere_stops_only_the_runs_that_write_to_it(
    engine: AsyncEngine,
) -> None:
    h = Harness(engine, consolidation={"concurrency": 2})
    peaks = watch(h.processor.slots)
    loud = [await _said(h, "loud", "u1", f"l{i}", fact) for i, fact in enumerate(LOUD)]
    calm = [await _said(h, "calm", f"v{i}", f"c{i}", f"I live in Oslo {i}.") for i in range(3)]
    locks = h.wiring.cube_locks()
    async with locks.hold(cube_key("loud", USER_CUBE, "u1")):  # another run holds it
        batch = asyncio.ensure_future(h.processor.process(loud + calm))

        async def calm_done() -> bool:
            return all([await _status(h, f"calm/c{i}#1") == "done" for i in range(3)])

        await eventually(calm_done, 8, "the calm tenant's runs done", 0.02)
        assert not batch.done()
        assert [await _status(h, f"loud/l{i}#1") for i in range(3)] != ["done"] * 3
        assert all(c.startswith("I live in Oslo") for c in h.provider.valid("fact"))
    handled = await asyncio.wait_for(batch, 10)
    assert [x.outcome for x in handled] == ["done"] * 6
    assert len(h.provider.valid("fact")) == 6
    assert max(n for n, _ in peaks) <= 2
    assert all(v <= h.processor.slots.share for _, by in peaks for v in by.values())


async def test_one_tenants_backlog_never_holds_every_slot(engine: AsyncEngine) -> None:
    h = Harness(engine, consolidation={"concurrency": 2})
    assert h.processor.slots.share == 1
    peaks = watch(h.processor.slots)
    gate = asyncio.Event()
    add = h.provider.add

    async def slow_for_loud(scope: Scope, cube: str, memories: Any) -> Any:
        if scope.tenant_id == "loud":
            await gate.wait()
        return await add(scope, cube, memories)

    h.provider.add = slow_for_loud  # type: ignore[method-assign]
    loud = [await _said(h, "loud", f"u{i}", f"l{i}", f"I live in Rome {i}.") for i in range(4)]
    calm = await _said(h, "calm", "v1", "c1", "I live in Oslo.")
    batch = asyncio.ensure_future(h.processor.process([*loud, calm]))
    await eventually(lambda: "I live in Oslo." in h.provider.valid("fact"), 8,
                     "the calm tenant's run done while the loud one's are slow", 0.02)
    assert not batch.done()
    gate.set()
    handled = await asyncio.wait_for(batch, 10)
    assert [x.outcome for x in handled] == ["done"] * 5
    assert max(by.get("loud", 0) for _, by in peaks) == 1
    assert max(n for n, _ in peaks) <= 2


async def test_a_tenants_own_share_of_the_slots_is_its_sessions_quota(
        engine: AsyncEngine) -> None:
    h = Harness(engine, consolidation={"concurrency": 2, "tenant_share": 2},
                quotas={"tenant_overrides": {"loud": {"sessions_consolidating": 1}}})
    slots, quota = h.processor.slots, h.wiring.quotas.sessions_consolidating
    assert (slots.share_of("loud"), slots.share_of("calm")) == (1, 2)
    peaks = watch(slots)
    gate = asyncio.Event()
    add = h.provider.add

    async def slow(scope: Scope, cube: str, memories: Any) -> Any:
        await gate.wait()
        return await add(scope, cube, memories)

    h.provider.add = slow  # type: ignore[method-assign]
    for tenant, share in (("loud", 1), ("calm", 2)):
        gate.clear()
        runs = [await _said(h, tenant, f"u{i}", f"{tenant}{i}", f"I live in Rome {i}.")
                for i in range(3)]
        batch = asyncio.ensure_future(h.processor.process(runs))
        await eventually(lambda n=3 - share: slots.waiting == n, 8, "runs in their slots", 0.02)
        await asyncio.sleep(0.05)
        assert slots.running == {tenant: share}  # the last free slot is kept for others
        gate.set()
        handled = await asyncio.wait_for(batch, 10)
        assert [x.outcome for x in handled] == ["done"] * 3
        assert max(by.get(tenant, 0) for _, by in peaks) == share
    assert quota.tally("loud") == (3, 2)  # each run counted once: two passed over first
    assert quota.tally("calm") == (3, 1)
    assert quota.view("loud", 0.0)["limit"] == 1


async def test_the_conflict_model_is_asked_outside_the_lock_and_its_decision_checked_in_it(
    engine: AsyncEngine,
) -> None:
    model = FakeChatModel()
    h = Harness(engine, model=model)
    model.answers = [json.dumps([{"content": "I live in Berlin.", "source": 1}])]
    await h.say("c1", [("user", "I live in Berlin.")])
    await h.pipeline.run(h.closed("c1"))
    berlin = next(k for k, m in h.provider.memories.items() if m.memory.content ==
                  "I live in Berlin.")
    asking, answer = asyncio.Event(), asyncio.Event()

    async def thinking() -> str:
        asking.set()
        await answer.wait()
        return json.dumps([{"index": 1, "action": "supersede", "expire_ids": [berlin]}])

    def again(purpose: str, messages: Any) -> str:
        shown = json.dumps(messages)
        ids = [k for k in h.provider.memories if k in shown]
        return json.dumps([{"index": 1, "action": "supersede", "expire_ids": ids}])

    model.answers = [json.dumps([{"content": "I live in Paris.", "source": 1}]),
                     lambda purpose, messages: thinking(), again]
    await h.say("c1", [("user", "I moved: I live in Paris.")])
    run = asyncio.ensure_future(h.pipeline.run(h.closed("c1", 2)))
    await asyncio.wait_for(asking.wait(), 10)
    # while the model thinks, the cube is free: another run stores a fact the
    # decision did not see
    async with asyncio.timeout(2):
        async with h.wiring.cube_locks().hold(cube_key("t1", USER_CUBE, "u1")):
            await h.provider.add(Scope("t1", "u1", "a1"), USER_CUBE, [MemoryCandidate(
                content="I live in Madrid.", type="text", scope="user", kind="fact")])
    answer.set()
    out = await asyncio.wait_for(run, 10)
    assert out.outcome == "done"
    # decided again, on what the cube holds now: Paris supersedes Berlin and Madrid
    assert model.purposes() == ["judge", "judge", "conflict", "conflict"]
    assert h.provider.valid("fact") == ["I live in Paris."]
