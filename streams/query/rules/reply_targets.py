"""Which topics a query's reply may be written to.

A request names its reply topic itself (``kafka_replyTopic``), so without a
check anyone who may produce to the query topic could make memstream write a
reply, keyed as the caller likes, onto any topic: ``memory.agent-config``
(and change another tenant's agent), the chat topic, a changelog. A reply goes
out only when its topic

- is none of memstream's own topics (``internal``: the topics of the
  settings; every topic starting with ``{app_id}-``, Faust's changelogs and
  the query group's; every one starting with ``__``, Kafka's), whatever the
  patterns say; and
- matches one of ``patterns``: shell-style globs (``*.replies``,
  ``team-?.answers``, :func:`fnmatch.fnmatchcase`, so case counts), the
  default being ``*.replies`` and the configured reply topic.

:meth:`ReplyTargets.refusal` answers why not, or None when the reply may go.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase


@dataclass(frozen=True)
class ReplyTargets:
    patterns: tuple[str, ...]
    internal: frozenset[str]
    internal_prefixes: tuple[str, ...] = ("__",)

    @classmethod
    def of(cls, patterns: Iterable[str], internal: Iterable[str], app_id: str) -> ReplyTargets:
        return cls(tuple(patterns), frozenset(internal), ("__", f"{app_id}-"))

    def refusal(self, topic: str) -> str | None:
        """Why a reply may not go to ``topic``; None when it may."""
        if topic in self.internal or topic.startswith(self.internal_prefixes):
            return "the reply topic is one of memstream's own topics"
        if not any(fnmatchcase(topic, p) for p in self.patterns):
            return "the reply topic matches none of MEMSTREAM_QUERY__REPLY_TOPICS"
        return None
