"""Records Faust's consumer drops are never committed, and are delivered again.

``apps/pausing_app.py`` pauses its partition in the middle of a fetched batch,
as Faust's own table recovery does: Faust drops the rest of the batch without a
word and counts the jump to the next record it delivers as acknowledged.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError

from tests.support.services import KAFKA_BOOTSTRAP, KAFKA_BROKER, unique
from tests.support.worker import ROOT, eventually

N = 1000
PAUSE_AT = 50


async def _committed(group: str, topic: str) -> int:
    """The group's committed offset (-1: none yet, or the coordinator not known yet)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=KAFKA_BOOTSTRAP)
    await admin.start()
    try:
        offsets = await admin.list_consumer_group_offsets(group)
    except KafkaError as exc:
        if not exc.retriable:
            raise
        return -1  # a fresh broker creates its offsets topic on the first lookup
    finally:
        await admin.close()
    meta = offsets.get(TopicPartition(topic, 0))
    return -1 if meta is None else int(meta.offset)


async def _topic_with_records(topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=KAFKA_BOOTSTRAP)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=KAFKA_BOOTSTRAP, linger_ms=20)
    await producer.start()
    try:
        await asyncio.gather(*[await producer.send(topic, b"r%d" % i) for i in range(N)])
    finally:
        await producer.stop()


@pytest.fixture
def run_app(tmp_path: Path) -> Iterator[object]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(topic: str, guard: bool) -> Path:
        out = tmp_path / f"{topic}.delivered"
        out.touch()
        env = {**os.environ, "TOPIC": topic, "APP_ID": topic, "BROKER": KAFKA_BROKER,
               "PAUSE_AT": str(PAUSE_AT), "OUT": str(out), "GUARD": "1" if guard else "0",
               "DATADIR": str(tmp_path / f"{topic}-data")}
        with open(tmp_path / f"{topic}.log", "ab") as log:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "tests.integration.apps.pausing_app", "worker",
                 "-l", "info"], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                start_new_session=True))
        return out

    yield start
    for p in procs:
        p.kill()
        p.wait(10)


def _processed(out: Path) -> list[int]:
    return [int(line) for line in out.read_text().split()]


def _delivered(out: Path) -> set[int]:
    return set(_processed(out))


async def test_dropped_records_are_not_committed_and_are_delivered_again(run_app: object) -> None:
    topic = unique("guard")
    await _topic_with_records(topic)
    out = run_app(topic, True)  # type: ignore[operator]

    async def done() -> bool:
        return await _committed(topic, topic) == N

    await eventually(done, 90, "every record committed")
    assert _delivered(out) == set(range(N))
    # and in order: no record was processed before one that came before it
    firsts = list(dict.fromkeys(_processed(out)))
    assert firsts == sorted(firsts)


async def test_without_the_guard_faust_commits_records_it_never_delivered(
    run_app: object,
) -> None:
    """Why the guard exists: the same app without it loses records."""
    topic = unique("noguard")
    await _topic_with_records(topic)
    out = run_app(topic, False)  # type: ignore[operator]

    async def done() -> bool:
        return await _committed(topic, topic) == N

    await eventually(done, 90, "the partition committed to its end")
    assert len(set(range(N)) - _delivered(out)) > 0
