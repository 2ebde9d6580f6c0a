"""Chat events a second per tenant on a real worker over Kafka, MariaDB and
Redis, a calm tenant's events on the same partition as a loud tenant's, across a
SIGKILL of the worker in the middle:

* ``delay`` (the default): the loud tenant's events over its quota are held back
  and stored later, every one, once, in the order produced; the calm tenant's
  are stored at once, while the loud tenant's wait;
* ``dead_letter``: the loud tenant's events over its quota are dead-lettered
  (``over_quota``); the calm tenant's are all stored; the loud tenant's stored
  events keep their order per conversation, every one of its events is stored
  or dead-lettered, none stored twice.

The decisions show on ``/metrics`` and ``/stats/quotas``."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable

import httpx
import pytest

from streams.adapters.kafka.partitioning import java_partition
from streams.stats.access import new_token, token_hash
from streams.wire.headers import header
from tests.integration.conftest import Stack, chat_event
from tests.support.worker import eventually

pytestmark = pytest.mark.alone  # its quotas are rates, which the machine's pace moves

TOKEN = new_token()
RATE, BURST = 5, 20
HALF = 120  # loud events a half; calm ones: a quarter of that


def same_partition(stack: Stack) -> tuple[str, list[str]]:
    """A calm conversation and two loud ones, all on one chat partition."""
    calm = "calm-conv"
    home = java_partition(calm.encode(), stack.partitions)
    loud = [c for c in (f"loud-conv-{i}" for i in range(100))
            if java_partition(c.encode(), stack.partitions) == home][:2]
    return calm, loud


def events(half: int, calm: str, loud: list[str]) -> list[dict[str, object]]:
    """``HALF`` loud events, alternating between the loud conversations, with a calm
    one after every fourth."""
    out: list[dict[str, object]] = []
    for i in range(half * HALF, (half + 1) * HALF):
        out.append(chat_event(i, loud[i % 2], tenant="loud"))
        if i % 4 == 3:
            out.append(chat_event(i // 4, calm, tenant="calm"))
    return out


def stored(stack: Stack, tenant: str) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in stack.sql(
        f"SELECT conversation_id, event_id FROM conversation_message "
        f"WHERE tenant_id = '{tenant}' ORDER BY id")]


def environment(**loud: object) -> dict[str, str]:
    return {"MEMSTREAM_QUOTAS__TENANT_OVERRIDES": json.dumps({"loud": loud}),
            "MEMSTREAM_WEB__STATS_TOKENS": json.dumps([{"sha256": token_hash(TOKEN),
                                                        "tenants": ["*"]}])}


async def quota_shown(port: str, decision: str) -> dict[str, object]:
    """The loud tenant's decision is on ``/metrics``, the calm one's is not; its row of
    the events quota in ``/stats/quotas``."""
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10,
                                 headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        metrics = (await http.get("/metrics")).text
        assert f'memstream_quota_decisions_total{{decision="{decision}",quota="events",' \
               'tenant="loud"}' in metrics
        assert f'decision="{decision}",quota="events",tenant="calm"' not in metrics
        body = (await http.get("/stats/quotas", params={"tenant": "loud"})).json()
        row: dict[str, object] = next(q for q in body["quotas"] if q["quota"] == "events")
        assert row["over_quota"] == decision
        return row


async def held_through(stack: Stack, disturb: Callable[[], object]) -> list[tuple[str, str]]:
    """The first half produced and the calm tenant's events of it stored while some of
    the loud tenant's are still held back; ``disturb`` (a kill, a worker joining); the
    second half; every loud event stored once, in produce order per conversation, none
    dead-lettered. Returns the calm tenant's rows."""
    calm, loud = same_partition(stack)
    first, second = events(0, calm, loud), events(1, calm, loud)
    await stack.produce(first)
    await eventually(lambda: len(stored(stack, "calm")) == HALF // 4, 60,
                     "every calm event of the first half stored")
    # the calm tenant's events did not wait for the loud tenant's held back
    assert len(stored(stack, "loud")) < HALF
    disturb()
    await stack.produce(second)
    sent = [e for e in first + second if e["tenant_id"] == "loud"]
    await eventually(lambda: len(stored(stack, "loud")) == len(sent), 120,
                     "every loud event stored")
    rows = stored(stack, "loud")
    assert len(rows) == len(set(rows)), "an event stored twice"
    for conv in loud:  # every one, in produce order
        assert [e for c, e in rows if c == conv] == [
            str(e["event_id"]) for e in sent if e["conversation_id"] == conv]
    assert not await stack.read_topic(stack.topics["dlq"])
    return stored(stack, "calm")


async def test_a_loud_tenant_is_delayed_in_order_and_a_calm_one_is_not(stack: Stack) -> None:
    env = environment(events_per_s=4 * RATE, events_burst=BURST)
    calm, _ = same_partition(stack)
    workers = [stack.worker(**env).start()]

    def kill() -> None:  # with events held: never acknowledged, read again
        workers[0].kill()
        workers[0] = stack.worker(**env).start()

    calm_rows = await held_through(stack, kill)
    assert calm_rows == [(calm, f"calm-{calm}-{i}") for i in range(2 * HALF // 4)]
    row = await quota_shown(workers[0].env["MEMSTREAM_WEB__PORT"], "delayed")
    assert isinstance(row["delayed"], int) and row["delayed"] > 0 and row["refused"] == 0


async def test_a_loud_tenant_is_dead_lettered_and_a_calm_one_stored(stack: Stack) -> None:
    env = environment(events_per_s=RATE, events_burst=BURST, events_over_quota="dead_letter")
    calm, loud = same_partition(stack)
    first, second = events(0, calm, loud), events(1, calm, loud)
    worker = stack.worker(**env).start()
    await stack.produce(first)
    await eventually(lambda: len(stored(stack, "calm")) >= HALF // 8, 60,
                     "the worker storing the first half")
    worker.kill()  # in the middle: what it did not commit is read again
    worker = stack.worker(**env).start()
    await stack.produce(second)
    n_calm = 2 * HALF // 4
    await eventually(lambda: len(stored(stack, "calm")) == n_calm, 90, "every calm event stored")

    sent = [e for e in first + second if e["tenant_id"] == "loud"]

    async def accounted() -> bool:
        dead = await stack.read_topic(stack.topics["dlq"])
        kept = {e for _, e in stored(stack, "loud")}
        return {str(e["event_id"]) for e in sent} <= kept | {
            json.loads(m.value)["event_id"] for m in dead}
    await eventually(accounted, 90, "every loud event stored or dead-lettered")

    assert stored(stack, "calm") == [(calm, f"calm-{calm}-{i}") for i in range(n_calm)]
    rows = stored(stack, "loud")
    assert len(rows) == len(set(rows)), "an event stored twice"
    for conv in loud:  # in produce order, with gaps where events were dead-lettered
        order = [str(e["event_id"]) for e in sent if e["conversation_id"] == conv]
        mine = [e for c, e in rows if c == conv]
        assert mine == sorted(mine, key=order.index)
    dead = await stack.read_topic(stack.topics["dlq"])
    assert dead and {header(m.headers, "memstream.error.reason") for m in dead} == {
        b"over_quota"}
    assert Counter(json.loads(m.value)["tenant_id"] for m in dead).keys() == {"loud"}
    assert header(dead[0].headers, "memstream.error.message").startswith(
        b"over the events quota of tenant 'loud' (5 a second, 20 at once): retry in ")
    # two workers, each with a full bucket, over the time it took
    assert len(rows) < len(sent) // 2, len(rows)

    row = await quota_shown(worker.env["MEMSTREAM_WEB__PORT"], "dead_lettered")
    assert (row["rate"], row["burst"]) == (RATE, BURST)
    assert isinstance(row["refused"], int) and isinstance(row["allowed"], int)
    assert row["refused"] > 0 and row["allowed"] >= BURST


async def test_events_held_back_through_a_rebalance_are_stored_once_in_order(
        stack: Stack) -> None:
    """A second worker joins while the first holds the loud tenant's events: what was
    held is let go and read again by the partitions' owners; every event is stored
    once, in order; no record is taken for one passed over."""
    env = environment(events_per_s=2 * RATE, events_burst=BURST)
    workers = [stack.worker(**env).start()]
    await held_through(stack, lambda: workers.append(stack.worker(**env).start()))
    logs = "".join(w.log_text() for w in workers)
    assert "records were passed over" not in logs
    assert "held back let go" in logs
