"""Dead letters exactly once against the real MariaDB and Kafka, whatever step a
publisher died at."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from aiokafka import AIOKafkaProducer
from pydantic import SecretStr

from streams.adapters.db.dead_letter_ledger import DeadLetterLedger
from streams.adapters.db.engine import create_engine
from streams.adapters.kafka.dead_letters import (
    DeadLetterFinder,
    ExactlyOnceDeadLetters,
    record_digest,
    source_of,
)
from streams.adapters.kafka.publish import ProducerPublisher
from streams.settings import DatabaseSettings, KafkaSettings
from streams.wire.dead_letter import dead_letter
from streams.wire.envelope import Outgoing, SourceRecord
from tests.integration.conftest import Stack, create_topic
from tests.support.services import KAFKA_BOOTSTRAP, KAFKA_BROKER, drop_database, migrated_database


class Parts:
    def __init__(self, dl: ExactlyOnceDeadLetters, ledger: DeadLetterLedger,
                 raw: ProducerPublisher, topic: str) -> None:
        self.dl, self.ledger, self.raw, self.topic = dl, ledger, raw, topic


@pytest.fixture
async def parts(stack: Stack) -> AsyncIterator[Parts]:
    topic = f"{stack.name}.dlq"
    await create_topic(topic, 4)
    db = f"{stack.database}_dl"
    engine = create_engine(DatabaseSettings(url=SecretStr(await migrated_database(db))))
    producer = AIOKafkaProducer(bootstrap_servers=KAFKA_BOOTSTRAP, acks="all")
    await producer.start()
    # the worker's producer (Faust's) takes the key before the value; aiokafka's the value
    raw = ProducerPublisher(lambda topic, key, value, partition, stamp, headers: producer.send(
        topic, value, key, partition, stamp, headers))
    ledger = DeadLetterLedger(engine)
    dl = ExactlyOnceDeadLetters(raw, dlq_topic=topic, ledger=lambda: ledger,
                                finder=DeadLetterFinder(KafkaSettings(broker=KAFKA_BROKER)))
    try:
        yield Parts(dl, ledger, raw, topic)
    finally:
        await producer.stop()
        await engine.dispose()
        drop_database(db)


def letter(topic: str, offset: int) -> Outgoing:
    rec = SourceRecord("chat", 3, offset, b"c1", b"\xff not utf-8")
    return dead_letter(rec, dlq_topic=topic, stage="ingest", reason="undecodable",
                       error_class="UnicodeDecodeError", message="bad")


async def letters_for(stack: Stack, topic: str) -> list[tuple[str, int, int] | None]:
    records = await stack.read_topic(topic)
    return [source_of(Outgoing(topic, r.key, r.value, list(r.headers or ()))) for r in records]


async def test_each_record_is_dead_lettered_once_whatever_step_failed(
    stack: Stack, parts: Parts
) -> None:
    t = parts.topic
    await parts.dl.publish([letter(t, 1)])
    await parts.dl.publish([letter(t, 1)])  # delivered again after the mark
    # died after recording and publishing, before marking
    await parts.ledger.record({("chat", 3, 2): (3, record_digest(letter(t, 2)))},
                              datetime.now(UTC))
    dead = letter(t, 2)
    await parts.raw.publish([Outgoing(dead.topic, dead.key, dead.value, dead.headers, 3)])
    await parts.dl.publish([letter(t, 2)])
    # died after recording, before publishing
    await parts.ledger.record({("chat", 3, 3): (3, record_digest(letter(t, 3)))},
                              datetime.now(UTC))
    await parts.dl.publish([letter(t, 3)])
    await asyncio.sleep(0.2)
    found = await letters_for(stack, t)
    assert sorted(found) == [("chat", 3, 1), ("chat", 3, 2), ("chat", 3, 3)]  # type: ignore[type-var]
