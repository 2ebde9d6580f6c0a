"""What the agents share inside one worker process: the runtime and the
processors built on it."""

from __future__ import annotations

from functools import cache
from typing import Any

from streams.app import app, settings
from streams.faust_glue import FaustTable
from streams.ingest import IngestConfig, IngestProcessor
from streams.publish import ProducerPublisher
from streams.runtime import Runtime
from streams.tables import sessions
from streams.web import install as install_web

runtime = Runtime(settings)
install_web(app)


async def _close_runtime(sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
    await runtime.stop()


app.on_before_shutdown.connect(_close_runtime)


@cache
def publisher() -> ProducerPublisher:
    return ProducerPublisher(app.producer.send)


async def ingest_processor() -> IngestProcessor:
    await runtime.start()
    k, i = settings.kafka, settings.ingest
    return IngestProcessor(
        IngestConfig(
            chat_topic=k.chat_topic,
            subagent_topic=k.subagent_topic,
            dlq_topic=k.dlq_topic,
            session_closed_topic=k.session_closed_topic,
            max_content_bytes=i.max_content_bytes,
            retry_initial_s=i.retry_initial_s,
            retry_max_s=i.retry_max_s,
        ),
        runtime.store,
        runtime.cache,
        publisher(),
        FaustTable(sessions),
    )
