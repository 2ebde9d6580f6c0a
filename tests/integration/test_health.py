"""/health/ready and /health/live flip when Kafka goes away and comes back.

The worker runs against a private broker that the test stops with SIGTERM and
starts again (the shared broker is never touched):

1. the worker is ready and live, and stays live while it works off a burst;
2. events wait (the message table is locked while they arrive, so they are
   fetched and not yet acknowledged), then Kafka stops: not ready at once;
3. the lock goes: the worker stores every event but cannot commit — lag > 0
   and no progress; past the stall timeout it is not live;
4. Kafka starts again: the offsets are committed, and it is ready and live.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pymysql
import pytest
from aiokafka import AIOKafkaProducer

from tests.integration.conftest import Stack, chat_event
from tests.support.private_kafka import PrivateKafka
from tests.support.services import MYSQL_PASSWORD, MYSQL_PORT, MYSQL_USER
from tests.support.worker import eventually

STALL_TIMEOUT_S = 3.0


@pytest.fixture
def kafka(tmp_path: Path) -> Iterator[PrivateKafka]:
    broker = PrivateKafka(tmp_path / "kafka").start()
    try:
        yield broker
    finally:
        broker.stop()


async def produce(kafka: PrivateKafka, topic: str, events: list[dict[str, Any]]) -> None:
    p = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap, acks="all")
    await p.start()
    try:
        for e in events:
            await p.send(topic, json.dumps(e).encode(), key=e["conversation_id"].encode())
        await p.flush()
    finally:
        await p.stop()


class Health:
    def __init__(self, port: str) -> None:
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5)

    def get(self, which: str) -> tuple[int, dict[str, Any]]:
        r = self.http.get(f"/health/{which}")
        return r.status_code, r.json()

    def status(self) -> tuple[int, int]:
        return self.get("ready")[0], self.get("live")[0]


async def test_health_flips_when_kafka_stops_and_starts(stack: Stack, kafka: PrivateKafka) -> None:
    worker = stack.worker(
        MEMSTREAM_KAFKA__BROKER=kafka.url,
        MEMSTREAM_HEALTH__STALL_TIMEOUT_S=str(STALL_TIMEOUT_S),
        MEMSTREAM_HEALTH__LAG_INTERVAL_S="0.25",
        MEMSTREAM_HEALTH__END_OFFSETS_INTERVAL_S="1",
    ).start()
    health = Health(worker.env["MEMSTREAM_WEB__PORT"])
    topic = stack.topics["chat"]

    def stored() -> int:
        return int(stack.sql("SELECT COUNT(*) FROM conversation_message")[0][0])

    # 1. ready and live; a burst is worked off without a stall
    await eventually(lambda: health.status() == (200, 200), 30, "ready and live")
    assert health.get("ready")[1]["coordinator_known"] is True
    await produce(kafka, topic, [chat_event(i, f"c{i % 4}") for i in range(20)])
    await eventually(lambda: stored() == 20 and health.get("live")[1]["lag"] == 0, 30,
                     "the burst stored and committed")
    assert health.status() == (200, 200)

    # 2. events wait while Kafka stops
    lock = pymysql.connect(host="127.0.0.1", port=MYSQL_PORT, user=MYSQL_USER,
                           password=MYSQL_PASSWORD, database=stack.database, autocommit=True,
                           read_timeout=60, write_timeout=60)
    try:
        with lock.cursor() as cur:
            # fail, not hang, should an open transaction of the worker hold the table
            cur.execute("SET SESSION lock_wait_timeout = 20")
            cur.execute("LOCK TABLES conversation_message WRITE")
        await produce(kafka, topic, [chat_event(i, f"c{i % 4}") for i in range(20, 40)])
        await eventually(lambda: health.get("live")[1]["lag"] == 20, 15, "the new events fetched")
        status, live = health.get("live")
        assert status == 200, live  # waiting work within the stall timeout is no stall
        kafka.stop()
        status, ready = health.get("ready")
        if status == 200:  # the heartbeat notices within a second
            await eventually(lambda: health.get("ready")[0] == 503, 10, "not ready")
            status, ready = health.get("ready")
        assert status == 503 and ready["status"] == "not_ready"
        assert "coordinator" in ready["reason"]
    finally:
        with lock.cursor() as cur:
            cur.execute("UNLOCK TABLES")
        lock.close()

    # 3. everything is stored, nothing can be committed: stuck past the stall timeout
    await eventually(lambda: stored() == 40, 30, "the waiting events stored")
    await eventually(lambda: health.get("live")[0] == 503, 3 * STALL_TIMEOUT_S + 5, "not live")
    _, live = health.get("live")
    assert live["status"] == "stuck" and live["lag"] == 20
    assert live["stalled_for_s"] > STALL_TIMEOUT_S
    assert {p["topic"] for p in live["lagging_partitions"]} == {topic}
    assert sum(p["lag"] for p in live["lagging_partitions"]) == 20
    assert health.get("ready")[0] == 503

    # 4. Kafka is back: committed, ready and live
    started = time.monotonic()
    kafka.start()
    await eventually(lambda: health.status() == (200, 200), 60, "ready and live again")
    await eventually(lambda: health.get("live")[1]["lag"] == 0, 30, "the offsets committed")
    assert health.status() == (200, 200)
    assert stored() == 40
    assert worker.alive
    assert time.monotonic() - started < 60
