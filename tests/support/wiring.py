"""The worker's composition root (:class:`streams.worker.wiring.Wiring`) over
fakes or local services: the tests build every processor the way the worker
does, with parts of their choosing."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streams.ingest.processor import IngestProcessor
from streams.memory.agent_configs import StaticAgentConfigs
from streams.session.stale import StaleHistories
from streams.settings import (
    ConsolidationSettings,
    IngestSettings,
    KafkaSettings,
    Settings,
)
from streams.tokens import TokenCounter
from streams.worker.wiring import Wiring

# the short topic names the tests' records carry
# one partition: the records the agent tests build are all in partition 0
TOPICS = KafkaSettings(chat_topic="chat", subagent_topic="sub", dlq_topic="dlq",
                       session_closed_topic="closed", idle_topic="idle", retry_topic="retry",
                       partitions=1)


@dataclass
class FakeParts:
    """Parts for :class:`Wiring`; a test sets the ones its processor uses."""

    engine: Any = None
    redis: Any = None
    store: Any = None
    cache: Any = None
    stale: Any = None
    reader: Any = None
    tokens: TokenCounter = field(default_factory=TokenCounter)
    providers: Any = None
    models: Any = None
    model_meter: Any = None
    sensitive: Any = None
    sensitive_counts: Any = None


def settings_for_tests(*, ingest: dict[str, Any] | None = None,
                  consolidation: dict[str, Any] | None = None,
                  kafka: dict[str, Any] | None = None, **groups: Any) -> Settings:
    """Settings with the tests' topic names and fast database retries."""
    return Settings(
        kafka=TOPICS.model_copy(update=kafka or {}),
        ingest=IngestSettings(**{"retry_initial_s": 0.001, "retry_max_s": 0.002,
                                 **(ingest or {})}),
        consolidation=ConsolidationSettings(**(consolidation or {})),
        **groups)


def wiring(parts: FakeParts, *, publisher: Any, settings: Settings | None = None,
           sessions: Any = None, agent_configs: Any = None,
           clock: Callable[[], float] = time.time,
           rng: Callable[[], float] | None = None) -> Wiring:
    extra = {} if rng is None else {"rng": rng}
    return Wiring(settings or settings_for_tests(), parts, publisher=publisher,
                  agent_configs=agent_configs or StaticAgentConfigs({}), sessions=sessions,
                  clock=clock, **extra)


def ingest_processor(store: Any, cache: Any, publisher: Any, table: Any, *,
                     stale: StaleHistories, settings: Settings | None = None,
                     clock: Callable[[], float] = time.time) -> IngestProcessor:
    """The worker's ingest processor over these stores."""
    parts = FakeParts(store=store, cache=cache, stale=stale)
    return wiring(parts, publisher=publisher, settings=settings, sessions=table,
                  clock=clock).ingest()
