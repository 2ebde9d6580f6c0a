"""The environment of a harness run on the local services (`bench/locomo.py`,
`bench/beam.py`): a fresh database, topics, reply topic and Redis prefix of the
run's own, the worker's Faust data directory under ``.bench/``, the embedder,
and no model (the rule judge, unless ``MEMSTREAM_LLM__*`` is set). Other
``MEMSTREAM_*`` settings pass through. The run's database, topics and data
directory are removed when it ends.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.services import (  # noqa: E402
    KAFKA_BROKER,
    REDIS_PORT,
    create_database,
    delete_topics_containing,
    drop_database,
    free_port,
)

TOPICS = ("chat", "subagent", "dlq", "retry", "session_closed", "queries", "agent_config", "idle")


@contextmanager
def harness_env(name: str, embedder: str) -> Iterator[dict[str, str]]:
    """The environment of one run of harness ``name`` (``locomo``, ``beam``)."""
    run = f"{name}-{int(time.time())}"
    db = f"bench_{run.replace('-', '_')}"
    data_dir = ROOT / ".bench" / run
    env = dict(os.environ)
    env.update({
        "MEMSTREAM_KAFKA__BROKER": KAFKA_BROKER,
        "MEMSTREAM_KAFKA__APP_ID": run,
        "MEMSTREAM_KAFKA__PARTITIONS": "4",
        "MEMSTREAM_KAFKA__DATA_DIR": str(data_dir),
        "MEMSTREAM_DATABASE__URL": create_database(db),
        "MEMSTREAM_REDIS__URL": f"redis://127.0.0.1:{REDIS_PORT}/5",
        "MEMSTREAM_REDIS__KEY_PREFIX": run.replace("-", ""),
        "MEMSTREAM_EMBEDDING__KIND": embedder,
        "MEMSTREAM_QUERY__REPLY_TOPIC": f"{run}.replies",
        "MEMSTREAM_WEB__PORT": str(free_port()),
    })
    for topic in TOPICS:
        env[f"MEMSTREAM_KAFKA__{topic.upper()}_TOPIC"] = f"{run}.{topic}"
    try:
        yield env
    finally:
        try:
            drop_database(db)
            with suppress(Exception):  # a broker gone keeps the topics, nothing worse
                asyncio.run(delete_topics_containing(run))
        finally:
            shutil.rmtree(data_dir, ignore_errors=True)
