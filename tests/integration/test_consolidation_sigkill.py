"""SIGKILL of the worker in the middle of a consolidation: after the restart the
memories are the same as those of an undisturbed run (nothing lost, nothing twice)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from tests.fakes.memos import FakeMemOS
from tests.integration.conftest import Stack, chat_event, session_end_event
from tests.integration.consolidation_support import FAST, run_status, set_agent
from tests.support.worker import eventually, wait_until

ADD = "/product/add"
LINES = ["Hi! I live in Oslo and I love skiing.", "Oslo is great for that.",
         "My dog is called Rex. I work as a nurse.", "Noted.",
         "Remember that my flat is number 12.", "Will do."]


@pytest.fixture
def memos() -> Iterator[FakeMemOS]:
    with FakeMemOS() as server:
        yield server


def session(tenant: str) -> list[dict[str, object]]:
    return [*(chat_event(i, "c1", tenant=tenant, content=text) for i, text in enumerate(LINES)),
            session_end_event("c1", tenant=tenant)]


def stored(memos: FakeMemOS, tenant: str) -> Counter[str]:
    return Counter(m["memory"] for m in memos.memories() if m["cube_id"].startswith(f"{tenant}:"))


async def test_sigkill_mid_consolidation_then_restart_gives_the_same_memories(
    stack: Stack, memos: FakeMemOS
) -> None:
    stack.extra_env.update(FAST)
    stack.extra_env["MEMSTREAM_MEMOS__BASE_URL"] = memos.url
    for tenant in ("calm", "kill"):
        set_agent(stack, tenant, "a1", "--provider", "MEMOS", "--open-long-memory", "on",
                  "--model", "chat-model")
    stack.worker().start()

    # the undisturbed run
    await stack.produce(session("calm"))
    await eventually(lambda: run_status(stack, "calm/c1#1") == "done", 60, "the calm run")
    expected = stored(memos, "calm")
    assert len(expected) == 4 and set(expected.values()) == {1}

    # the same session for another tenant; MemOS answers its first write only after 3 s
    memos.delay_next(1, 3.0, path=ADD)

    def writing() -> bool:
        return any(str(b.get("user_id", "")).startswith("kill:") for b in memos.bodies(ADD))

    await stack.produce(session("kill"))
    await eventually(writing, 60, "the first write to MemOS")
    stack.workers[-1].kill()  # SIGKILL while the provider call is in flight
    assert run_status(stack, "kill/c1#1") == "judged"
    (started, written), = stack.sql(
        "SELECT COUNT(write_started_at), COUNT(memory_id) FROM consolidation_candidate "
        "WHERE closed_id = 'kill/c1#1'")
    assert (started, written) == ("1", "0")
    # MemOS finishes the write the dead worker never heard back about
    wait_until(lambda: all(r.status is not None for r in memos.requests(ADD)), 10,
               "the slow write to land")
    assert sum(stored(memos, "kill").values()) == 1

    stack.worker().start()
    await eventually(lambda: run_status(stack, "kill/c1#1") == "done", 60, "the resumed run")
    assert stored(memos, "kill") == expected
