"""``make bench-query``: a finished run leaves neither its topics on the broker nor its
worker's Faust data directory under ``.bench/``, run after run."""

from __future__ import annotations

import asyncio
import importlib
import sys
import time
from pathlib import Path

from aiokafka.admin import AIOKafkaAdminClient

from tests.integration.conftest import create_topic
from tests.support.services import KAFKA_BOOTSTRAP, unique

ROOT = Path(__file__).resolve().parents[2]


async def topics_named(marker: str) -> list[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=KAFKA_BOOTSTRAP)
    await admin.start()
    try:
        return [t for t in await admin.list_topics() if marker in t]
    finally:
        await admin.close()


def test_a_finished_run_leaves_no_topic_and_no_data_directory() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        query = importlib.import_module("query")
    finally:
        sys.path.remove(str(ROOT / "bench"))
    run = unique("r")
    settings = query.run_settings(run, "sqlite+aiosqlite://", "none")
    data = Path(settings.kafka.data_dir)
    assert data == ROOT / ".bench" / f"qbench-{run}"
    (data / "tables").mkdir(parents=True)
    (data / "tables" / "offsets").write_text("7")
    asyncio.run(create_topic(f"qbench-{run}.queries", 1))
    assert asyncio.run(topics_named(run)) == [f"qbench-{run}.queries"]
    asyncio.run(query.forget_run(settings))
    assert not data.exists()
    for _ in range(50):  # deletion is asynchronous on the broker
        if not asyncio.run(topics_named(run)):
            break
        time.sleep(0.1)
    assert asyncio.run(topics_named(run)) == []
