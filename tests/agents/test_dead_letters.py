"""Dead letters exactly once per source record: the ledger protocol against fakes."""

from __future__ import annotations

from datetime import datetime

import pytest

from streams.adapters.db.dead_letter_ledger import LedgerEntry, SourceKey
from streams.adapters.kafka.dead_letters import ExactlyOnceDeadLetters, source_of
from streams.wire.dead_letter import dead_letter
from streams.wire.envelope import Outgoing, SourceRecord
from tests.agents.fakes import FakePublisher


class FakeLedger:
    def __init__(self) -> None:
        self.rows: dict[SourceKey, LedgerEntry] = {}
        self.marked: list[SourceKey] = []

    async def record(self, wanted: dict[SourceKey, int],
                     now: datetime) -> dict[SourceKey, LedgerEntry]:
        out = {}
        for key, part in wanted.items():
            if key in self.rows:
                out[key] = LedgerEntry(self.rows[key].dlq_partition, self.rows[key].sent,
                                       self.rows[key].recorded_at, mine=False)
            else:
                self.rows[key] = out[key] = LedgerEntry(part, False, now, mine=True)
        return out

    async def mark_sent(self, keys: list[SourceKey]) -> None:
        self.marked += keys
        for k in keys:
            e = self.rows[k]
            self.rows[k] = LedgerEntry(e.dlq_partition, True, e.recorded_at, e.mine)


class FakeFinder:
    def __init__(self, there: set[SourceKey] | None = None, partitions: int = 4) -> None:
        self.there = there or set()
        self.n = partitions
        self.looked: list[tuple[int, set[SourceKey]]] = []

    async def partitions(self, topic: str) -> int:
        return self.n

    async def published(self, topic: str, partition: int, since: datetime,
                        wanted: set[SourceKey]) -> set[SourceKey]:
        self.looked.append((partition, set(wanted)))
        return wanted & self.there


def letter(offset: int, partition: int = 5) -> Outgoing:
    rec = SourceRecord("chat", partition, offset, b"k", b"not json")
    return dead_letter(rec, dlq_topic="dlq", stage="ingest", reason="undecodable",
                       error_class="JSONDecodeError", message="bad")


def exact(ledger: FakeLedger, finder: FakeFinder, pub: FakePublisher) -> ExactlyOnceDeadLetters:
    return ExactlyOnceDeadLetters(pub, dlq_topic="dlq", ledger=lambda: ledger,  # type: ignore[arg-type,return-value]
                                  finder=finder)  # type: ignore[arg-type]


@pytest.fixture
def parts() -> tuple[FakeLedger, FakeFinder, FakePublisher, ExactlyOnceDeadLetters]:
    ledger, finder, pub = FakeLedger(), FakeFinder(), FakePublisher()
    return ledger, finder, pub, exact(ledger, finder, pub)


async def test_a_letter_goes_out_once_to_a_fixed_partition_and_is_marked(parts: tuple) -> None:  # type: ignore[type-arg]
    ledger, _, pub, dl = parts
    await dl.publish([letter(7)])
    (out,) = pub.on("dlq")
    assert out.partition == 5 % 4 and source_of(out) == ("chat", 5, 7)
    assert ledger.marked == [("chat", 5, 7)]
    await dl.publish([letter(7)])  # the record delivered again
    assert len(pub.on("dlq")) == 1


async def test_an_unmarked_letter_found_in_the_topic_is_not_sent_again() -> None:
    ledger, pub = FakeLedger(), FakePublisher()
    await ledger.record({("chat", 5, 7): 1}, datetime.now().astimezone())  # died before marking
    finder = FakeFinder(there={("chat", 5, 7)})
    await exact(ledger, finder, pub).publish([letter(7)])
    assert pub.on("dlq") == [] and finder.looked == [(1, {("chat", 5, 7)})]
    assert ledger.rows[("chat", 5, 7)].sent


async def test_an_unmarked_letter_not_in_the_topic_is_sent() -> None:
    ledger, pub = FakeLedger(), FakePublisher()
    await ledger.record({("chat", 5, 7): 1}, datetime.now().astimezone())  # died before publishing
    await exact(ledger, FakeFinder(), pub).publish([letter(7), letter(8)])
    assert sorted(source_of(o)[2] for o in pub.on("dlq")) == [7, 8]  # type: ignore[index]
    assert all(ledger.rows[k].sent for k in ledger.rows)


async def test_other_records_pass_through(parts: tuple) -> None:  # type: ignore[type-arg]
    ledger, _, pub, dl = parts
    retry = Outgoing("retry", b"k", b"{}", [])
    plain = Outgoing("dlq", b"k", b"x", [])  # names no source: nothing to key it on
    await dl.publish([retry, plain, letter(1)])
    assert pub.on("retry") == [retry]
    assert len(pub.on("dlq")) == 2 and ledger.marked == [("chat", 5, 1)]


async def test_an_unknown_partition_count_publishes_as_a_plain_publisher() -> None:
    ledger, pub = FakeLedger(), FakePublisher()
    await exact(ledger, FakeFinder(partitions=0), pub).publish([letter(1)])
    assert len(pub.on("dlq")) == 1 and ledger.rows == {}
