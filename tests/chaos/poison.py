"""Poison records: input memstream must dead-letter, once each, and survive.

On the chat topic: bytes that are not JSON, not UTF-8, JSON nested 1,200
levels deep, and chat messages that are well-formed JSON but unfit to store —
a lone surrogate in the content, a ``created_at`` that overflows UTC, tool
calls over 64 KiB, content over 64 KiB, no tenant, an unknown type, ids with
surrounding spaces, an agent id of 250 characters. On the
internal topics (idle checks, session-closed, retry, sub-agent chat): garbage
bytes, as a misbehaving producer would write them.

Every value is unique, so the dead-letter topic is matched on the original
bytes, which memstream keeps unchanged. Positions are spread over the stream
(a little jitter from the seed); each record is keyed by the conversation of
its neighbourhood, so it lands in a partition with traffic around it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class _Conversation(Protocol):
    @property
    def tenant(self) -> str: ...
    @property
    def user(self) -> str: ...
    @property
    def agent(self) -> str: ...
    @property
    def id(self) -> str: ...


@dataclass(frozen=True)
class Poison:
    name: str
    topic: str  # chat, idle, closed, retry, subagent
    position: int  # index in the published stream
    key: bytes
    value: bytes


POISON_TIME = "2026-03-02T09:00:00Z"
BIG = 70_000  # over the 64 KiB limits


def _message(c: _Conversation, event_id: str, **fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"event_id": event_id, "type": "message", "tenant_id": c.tenant,
                           "user_id": c.user, "agent_id": c.agent, "conversation_id": c.id,
                           "role": "user", "content": "poison", "created_at": POISON_TIME}
    doc.update(fields)
    return {k: v for k, v in doc.items() if v is not None}


def _json(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc).encode()  # ASCII: a lone surrogate travels as \\ud800


Make = Callable[[_Conversation, str], bytes]
CHAT: dict[str, Make] = {
    "not_json": lambda c, tag: f"chaos {tag}: this is not json".encode(),
    "not_utf8": lambda c, tag: b"\xff\xfe" + tag.encode() + b"\xc3\x28",
    "nested_1200": lambda c, tag: ("[" * 1200 + json.dumps(tag) + "]" * 1200).encode(),
    "lone_surrogate": lambda c, tag: _json(_message(c, tag, content="x\ud800")),
    "year_9999": lambda c, tag: _json(_message(c, tag, created_at="9999-12-31T23:59:59-01:00")),
    "tool_calls_64k": lambda c, tag: _json(_message(
        c, tag, role="assistant", content="",
        tool_calls=[{"id": f"call-{tag}", "type": "function",
                     "function": {"name": "upload", "arguments": "a" * BIG}}])),
    "content_64k": lambda c, tag: _json(_message(c, tag, content="z" * BIG)),
    "missing_tenant": lambda c, tag: _json(_message(c, tag, tenant_id=None)),
    "unknown_type": lambda c, tag: _json(_message(c, tag, type="reaction")),
    "user_id_trailing_space": lambda c, tag: _json(_message(c, tag, user_id=c.user + " ")),
    "conversation_id_leading_space": lambda c, tag: _json(_message(
        c, tag, conversation_id=" " + c.id)),
    "agent_id_250": lambda c, tag: _json(_message(c, tag, agent_id="a" * 250)),
}
INTERNAL = ("idle", "closed", "retry", "subagent")


def poison_records(rng: random.Random, around: Sequence[_Conversation],
                   enabled: bool = True) -> list[Poison]:
    """The poison of a stream of ``len(around)`` good events (``around[i]``: the
    conversation of good event ``i``), with their positions in the whole stream."""
    if not enabled or not around:
        return []
    kinds = [("chat", name) for name in CHAT] + [(topic, f"{topic}_garbage") for topic in INTERNAL]
    rng.shuffle(kinds)
    total = len(around) + len(kinds)
    out: list[Poison] = []
    taken: set[int] = set()
    for i, (topic, name) in enumerate(kinds):
        pos = min(total - 1, max(0, (i + 1) * total // (len(kinds) + 1) + rng.randint(-5, 5)))
        while pos in taken:
            pos = (pos + 1) % total
        taken.add(pos)
        conv = around[min(pos, len(around) - 1)]
        tag = f"poison-{i}-{name}"
        value = (CHAT[name](conv, tag) if topic == "chat"
                 else b"\x00\xffchaos garbage " + tag.encode())
        out.append(Poison(name, topic, pos, conv.id.encode(), value))
    return sorted(out, key=lambda p: p.position)
