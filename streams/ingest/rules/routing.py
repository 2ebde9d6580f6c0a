"""Where a decoded chat event goes: stored here, re-keyed, dropped or refused.

A conversation's state lives in one partition, its *home*: the partition
Java's default partitioner picks for the conversation id as key (murmur2).
Producers that hash otherwise (librdkafka's default, a custom partitioner) or
send no key put events elsewhere; those are re-keyed through the internal
re-key topic (``memory.subagent-chat``) to their home partition, the way a
sub-agent's chat is re-keyed to its parent conversation. The internal topic
takes only what this rule would have sent there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from streams.ingest.rules.subagent import Disposition, disposition
from streams.wire.records import ChatMessage, SessionEnd

Action = Literal["store", "store_in_parent", "rekey", "drop", "refuse"]


@dataclass(frozen=True, slots=True)
class Placement:
    action: Action
    conversation_id: str | None = None  # rekey: the conversation whose home it goes to
    partition: int | None = None  # rekey: that home (None: the producer's partitioner)


def place(
    event: ChatMessage | SessionEnd,
    *,
    internal: bool,
    partition: int,
    home: Callable[[str], int] | None,
    rekeyed: bool = False,
) -> Placement:
    """``internal``: read from the re-key topic; ``partition``: where it was read;
    ``home``: the home partition of a conversation id (None: trust the producer);
    ``rekeyed``: the record carries the origin the ingest agent stamps on what
    it re-keys (an ordinary event written to the re-key topic straight is refused)."""
    what = disposition(event)
    if what is Disposition.DROP:
        return Placement("refuse" if internal else "drop")
    if what is Disposition.REROUTE:
        assert isinstance(event, ChatMessage) and event.parent_conversation_id
        target = event.parent_conversation_id
        if internal:  # in the parent's home, where this rule sent it
            return Placement("store_in_parent" if home is None or home(target) == partition
                             else "refuse")
        return Placement("rekey", target, home(target) if home else None)
    conversation = event.conversation_id
    if home is not None and (own := home(conversation)) != partition:
        return Placement("refuse") if internal else Placement("rekey", conversation, own)
    return Placement("refuse" if internal and not rekeyed else "store")
