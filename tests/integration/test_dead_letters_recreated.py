"""A topic deleted and created again starts its offsets over: a new poison record
read at an offset whose record was dead-lettered before is dead-lettered too (never
taken for the old one and lost), and each is still dead-lettered once however often
it is delivered — against the real MariaDB and Kafka."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import TopicAlreadyExistsError

from streams.wire.dead_letter import dead_letter
from streams.wire.envelope import SourceRecord
from tests.integration.conftest import Stack, create_topic, partitions
from tests.integration.test_dead_letters import Parts, letters_for, parts
from tests.support.services import KAFKA_BOOTSTRAP

__all__ = ["parts"]
POISON = b"\xff not utf-8"


async def poison_read(stack: Stack, topic: str) -> SourceRecord:
    """The poison record produced to ``topic`` and read back as a stage reads it."""
    producer = AIOKafkaProducer(bootstrap_servers=KAFKA_BOOTSTRAP, acks="all")
    await producer.start()
    try:
        await producer.send_and_wait(topic, POISON, key=b"c1", partition=0)
    finally:
        await producer.stop()
    [r] = await stack.read_topic(topic, expect=1)
    return SourceRecord(topic, r.partition, r.offset, r.key, r.value,
                        list(r.headers or ()), r.timestamp / 1000)


async def recreate(topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=KAFKA_BOOTSTRAP)
    await admin.start()
    try:
        await admin.delete_topics([topic])
    finally:
        await admin.close()
    for _ in range(100):
        if not await partitions(topic):
            try:
                await create_topic(topic, 1)
                return
            except TopicAlreadyExistsError:  # its deletion is still under way
                pass
        await asyncio.sleep(0.2)
    raise AssertionError(f"{topic} was not created again")


async def test_a_new_poison_record_at_an_old_offset_of_a_recreated_topic_is_dead_lettered(
        stack: Stack, parts: Parts) -> None:
    source = f"{stack.name}.chat"
    await create_topic(source, 1)

    def letter_of(rec: SourceRecord) -> list:  # type: ignore[type-arg]
        return [dead_letter(rec, dlq_topic=parts.topic, stage="ingest", reason="undecodable",
                            error_class="UnicodeDecodeError", message="bad")]

    old = await poison_read(stack, source)
    await parts.dl.publish(letter_of(old))
    await parts.dl.publish(letter_of(old))  # delivered again: still one dead letter

    await recreate(source)
    new = await poison_read(stack, source)  # the same bytes, sent again by the producer
    assert (new.partition, new.offset) == (old.partition, old.offset)
    assert new.timestamp != old.timestamp
    await parts.dl.publish(letter_of(new))
    await parts.dl.publish(letter_of(new))  # delivered again: still one dead letter

    await asyncio.sleep(0.2)
    found = await letters_for(stack, parts.topic)
    assert found == [(source, 0, old.offset), (source, 0, old.offset)]
