"""A state leaves the sessions table only once every record applied to it is
committed: ``SessionPlanning.durable`` over the consumer's committed offsets."""

from __future__ import annotations

from typing import Any

import pytest

from streams.ingest.model import IngestConfig
from streams.ingest.planning import SessionPlanning
from streams.session.model import SessionState

CONFIG = IngestConfig(chat_topic="chat", subagent_topic="sub", dlq_topic="dlq",
                      session_closed_topic="closed", idle_topic="idle")


def planning(committed: dict[tuple[str, int], int] | None) -> SessionPlanning:
    none: Any = None
    p = SessionPlanning(CONFIG, none, none, none, clock=lambda: 0.0, home=lambda conv: 3)
    p.committed = None if committed is None else (lambda t, n: committed.get((t, n)))
    return p


STATE = SessionState(tenant_id="t", user_id="u", agent_id="a", conversation_id="c",
                     offsets={"chat": 5, "sub": 2, "idle": 9})


@pytest.mark.parametrize(
    ("committed", "durable"),
    [
        ({("chat", 3): 6, ("sub", 3): 3}, True),  # the next to read is past both
        ({("chat", 3): 5, ("sub", 3): 3}, False),  # offset 5 of chat not committed
        ({("chat", 3): 6}, False),  # nothing known of the sub-agent topic
        ({("chat", 0): 9, ("sub", 0): 9}, False),  # another partition's offsets
        ({("chat", 3): 6, ("sub", 3): 3, ("idle", 3): 0}, True),  # idle checks aside
        (None, True),  # not wired to a consumer: every record counts as committed
    ],
)
def test_durable_only_when_every_record_applied_is_committed(
    committed: dict[tuple[str, int], int] | None, durable: bool
) -> None:
    assert planning(committed).durable(STATE) is durable
