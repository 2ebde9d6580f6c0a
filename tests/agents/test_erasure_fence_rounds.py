"""Which conversations a user erasure takes whole is found by the erasure, not by
ingest (issue 41, finding 4: the lookup ran inside ingest's batch on every
partition, holding up every tenant of the partition while it scanned), on SQLite
with the real stores:

* the first round of fences only takes the erasure in; the erasure then looks
  the conversations up itself — complete at that point, since no partition
  stores anything it covers any more — and records them;
* the second round goes only to the partitions holding a conversation that goes
  whole, which read that record (a primary-key range of the erasure's own rows);
* a conversation a partition stored between the erasure's plan and its fence is
  in that record, so its session state is deleted too.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.erasure_reads import ConversationReads
from streams.adapters.db.messages import MessageStore, message_row
from streams.adapters.kafka.partitioning import home_partitions
from streams.erasure.ports import ErasureLog
from streams.wire.envelope import Outgoing
from streams.wire.erasure import ErasureFence
from streams.wire.records import ChatMessage
from tests.agents.test_erasure_sqlite import T0, Setup, request
from tests.support.wiring import settings_for_tests

PARTITIONS = 4


class Partitions:
    """Ingest partitions as the erasure sees them: the first round is passed after a
    partition stored one more message of the user in a new conversation (taken from
    the topic before the fence); at the second, each reads what goes whole."""

    def __init__(self, engine: AsyncEngine, log: ErasureLog) -> None:
        self.engine = engine
        self.log = log
        self.fences: list[ErasureFence] = []
        self.read: dict[int, list[str]] = {}

    async def publish(self, records: Sequence[Outgoing]) -> None:
        for r in records:
            f = ErasureFence.model_validate_json(r.value or b"")
            self.fences.append(f)
            if f.round == 1 and f.partition == 0:
                msg = ChatMessage(event_id="late-0", type="message", tenant_id="t1",
                                  user_id="u1", agent_id="a1", conversation_id="c9",
                                  role="user", content="I also have a boat.",
                                  created_at=T0 + timedelta(minutes=9))
                await MessageStore(self.engine).store([message_row(msg, T0, session_seq=1)])
            if f.round == 2:
                self.read[f.partition] = await ConversationReads(self.engine) \
                    .whole_conversations(f.seq)
            await self.log.pass_fence(f.seq, f.partition, 0, T0, f.round)


async def test_the_erasure_finds_what_goes_whole_and_tells_only_the_partitions_holding_it(
        engine: AsyncEngine) -> None:
    s = Setup(engine)
    partitions = Partitions(engine, s.registry.log)
    s.wiring.publisher = partitions
    s.wiring.settings = settings_for_tests(kafka={"partitions": PARTITIONS})
    executor = s.wiring.erasure_processor(s.offsets, PARTITIONS).executor
    await s.said()

    receipt = await executor.erase(request(target="user", user_id="u1"))
    assert receipt.status == "done"
    first = [f.partition for f in partitions.fences if f.round == 1]
    second = [f.partition for f in partitions.fences if f.round == 2]
    assert first == list(range(PARTITIONS))
    home = home_partitions(PARTITIONS)
    assert sorted(second) == sorted({home("c1"), home("c9")})
    # c9 was stored after the erasure planned, before partition 0 took it in: found
    for p in second:
        assert sorted(partitions.read[p]) == ["c1", "c9"]
    assert await s.rows_of("u1", "c9") == {}
    # once it is done, its list is gone: a second round replayed later deletes nothing
    assert await ConversationReads(engine).whole_conversations(partitions.fences[0].seq) == []
