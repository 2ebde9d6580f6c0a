"""Dead letters exactly once per source record: the ledger protocol against fakes."""

from __future__ import annotations

from datetime import datetime

import pytest

from streams.adapters.db.dead_letter_ledger import LedgerEntry, SourceKey, Wanted
from streams.adapters.kafka.dead_letters import ExactlyOnceDeadLetters, record_digest, source_of
from streams.wire.dead_letter import dead_letter
from streams.wire.envelope import Outgoing, SourceRecord
from tests.agents.fakes import FakePublisher


class FakeLedger:
    def __init__(self) -> None:
        self.rows: dict[SourceKey, LedgerEntry] = {}
        self.digests: dict[SourceKey, str] = {}
        self.marked: list[SourceKey] = []

    async def record(self, wanted: dict[SourceKey, Wanted],
                     now: datetime) -> dict[SourceKey, LedgerEntry]:
        out = {}
        for key, (part, digest) in wanted.items():
            if key in self.rows and self.digests[key] == digest:
                out[key] = LedgerEntry(self.rows[key].dlq_partition, self.rows[key].sent,
                                       self.rows[key].recorded_at, mine=False)
            else:
                self.rows[key] = out[key] = LedgerEntry(part, False, now, mine=True)
                self.digests[key] = digest
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
                        wanted: dict[SourceKey, str]) -> set[SourceKey]:
        self.looked.append((partition, set(wanted)))
        return set(wanted) & self.there


def letter(offset: int, partition: int = 5, value: bytes = b"not json",
           timestamp: float | None = None) -> Outgoing:
    rec = SourceRecord("chat", partition, offset, b"k", value, timestamp=timestamp)
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
    await ledger.record({("chat", 5, 7): (1, record_digest(letter(7)))},
                        datetime.now().astimezone())  # died before marking
    finder = FakeFinder(there={("chat", 5, 7)})
    await exact(ledger, finder, pub).publish([letter(7)])
    assert pub.on("dlq") == [] and finder.looked == [(1, {("chat", 5, 7)})]
    assert ledger.rows[("chat", 5, 7)].sent


async def test_an_unmarked_letter_not_in_the_topic_is_sent() -> None:
    ledger, pub = FakeLedger(), FakePublisher()
    await ledger.record({("chat", 5, 7): (1, record_digest(letter(7)))},
                        datetime.now().astimezone())  # died before publishing
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


async def test_another_record_at_a_place_dead_lettered_before_goes_out(parts: tuple) -> None:  # type: ignore[type-arg]
    """The topic was created again: its offsets started over."""
    ledger, _, pub, dl = parts
    await dl.publish([letter(7, timestamp=1000.0)])
    await dl.publish([letter(7, timestamp=1000.0)])  # the same record delivered again
    assert len(pub.on("dlq")) == 1
    await dl.publish([letter(7, timestamp=2000.0)])  # the same bytes, produced again later
    await dl.publish([letter(7, value=b"other", timestamp=2000.0)])
    await dl.publish([letter(7, value=b"other", timestamp=2000.0)])  # delivered again
    assert [o.value for o in pub.on("dlq")] == [b"not json", b"not json", b"other"]


def test_the_digest_is_of_key_value_and_timestamp_not_of_why_it_failed() -> None:
    again = dead_letter(SourceRecord("chat", 5, 7, b"k", b"not json", timestamp=1.5),
                        dlq_topic="dlq", stage="ingest", reason="other", error_class="E",
                        message="another message")
    assert record_digest(letter(7, timestamp=1.5)) == record_digest(again)
    assert record_digest(letter(7, timestamp=1.5)) != record_digest(letter(7, timestamp=1.6))
    assert record_digest(letter(7)) != record_digest(letter(7, value=b"not jso"))
