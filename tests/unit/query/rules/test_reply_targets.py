"""Which topics a reply may go to: table-driven."""

from __future__ import annotations

import pytest

from streams.query.rules.reply_targets import ReplyTargets

OWN = ["chat.messages", "memory.agent-config", "memory.queries", "memory.dlq", "memory.retry",
       "memory.session-closed", "memory.subagent-chat", "memory.idle"]
TARGETS = ReplyTargets.of(["*.replies", "memory.replies", "team-?.answers"], OWN, "memstream")


@pytest.mark.parametrize(("topic", "allowed"), [
    ("memory.replies", True),
    ("billing.replies", True),
    ("a.b.replies", True),
    ("team-1.answers", True),
    ("team-12.answers", False),
    ("replies", False),
    ("billing.Replies", False),  # case counts, as in Kafka
    ("billing.replies2", False),
    ("memory.agent-config", False),
    ("chat.messages", False),
    ("memory.queries", False),
    ("memory.dlq", False),
    ("memstream-sessions-changelog", False),
    ("memstream-query", False),
    ("__consumer_offsets", False),
    ("__x.replies", False),  # Kafka's own, whatever the pattern says
    ("memstream-x.replies", False),
])
def test_refusal(topic: str, allowed: bool) -> None:
    assert (TARGETS.refusal(topic) is None) is allowed


def test_own_topics_win_over_a_pattern_that_names_them() -> None:
    careless = ReplyTargets.of(["*"], OWN, "memstream")
    assert careless.refusal("memory.agent-config") == (
        "the reply topic is one of memstream's own topics")
    assert careless.refusal("anything.else") is None


def test_no_pattern_allows_nothing() -> None:
    assert ReplyTargets.of([], OWN, "memstream").refusal("memory.replies") is not None
