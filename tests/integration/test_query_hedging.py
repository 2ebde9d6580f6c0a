"""MemoryClient's hedged queries against real workers: right after one of two
workers is SIGKILLed, callers with a 1 s deadline are answered in time — those
whose first copy went to the dead worker's partitions by the hedge, once each —
while a client that does not hedge times out on those partitions."""

from __future__ import annotations

import asyncio

import pytest

from streams.client import MemoryClient, QueryOutcome, QueryTimeoutError
from tests.integration.conftest import Stack
from tests.integration.query_support import QUERY_ENV, query_partitions, two_workers
from tests.support.services import KAFKA_BOOTSTRAP

pytestmark = pytest.mark.alone  # it times replies against a 1 s deadline

# the dead worker holds its partitions this long: every query below falls inside
QUERY_SESSION_S = 30.0
USERS = 24


def client(stack: Stack, hedge_after_s: float | None, outcomes: list[QueryOutcome],
           reply_topic: str) -> MemoryClient:
    return MemoryClient(KAFKA_BOOTSTRAP, request_topic=stack.topics["queries"],
                        reply_topic=reply_topic, reply_partitions=1, timeout_s=1.0,
                        hedge_after_s=hedge_after_s, query_group=f"{stack.name}-query",
                        on_outcome=outcomes.append)


async def ask_all(c: MemoryClient) -> int:
    async def one(user: int) -> bool:
        try:
            await c.query(tenant_id="t1", user_id=f"u{user}", agent_id="a1",
                          message="where to?", include_short_term=False, timeout_ms=1000)
            return True
        except QueryTimeoutError:
            return False

    return sum(await asyncio.gather(*(one(u) for u in range(USERS))))


async def test_a_hedging_caller_is_answered_within_its_deadline_after_a_sigkill(
        stack: Stack) -> None:
    env = {**QUERY_ENV, "MEMSTREAM_QUERY__SESSION_TIMEOUT_S": str(QUERY_SESSION_S),
           # the client's hedge alone: no worker takes another's requests over
           "MEMSTREAM_QUERY__RESCUE": "false"}
    doomed, _ = await two_workers(stack, env)
    dead = set(query_partitions(doomed) or ())
    hedged: list[QueryOutcome] = []
    plain: list[QueryOutcome] = []
    async with client(stack, 0.25, hedged, f"{stack.name}.hedged-replies") as h, \
            client(stack, None, plain, f"{stack.name}.plain-replies") as p:
        assert await ask_all(h) == USERS and await ask_all(p) == USERS  # both workers alive
        hedged.clear()
        plain.clear()
        doomed.kill()
        answered = await ask_all(h)
        answered_plain = await ask_all(p)

    on_dead = [o for o in hedged if o.partition in dead]
    assert on_dead, "no query went to the dead worker's partitions"
    assert answered == USERS and all(o.answered and o.latency_s < 1.0 for o in hedged)
    assert all(o.hedged and o.hedge_won for o in on_dead)
    # without the hedge, the queries on the dead worker's partitions are not answered in time
    assert answered_plain == USERS - sum(1 for o in plain if o.partition in dead)
