"""Messages of a sub-agent's virtual conversation (``agent:`` prefix).

A sub-agent works in its own virtual conversation. Only its chat (user or
assistant text) belongs in the parent conversation's history; its system
prompts, tool calls, tool results and session ends do not.
"""

from __future__ import annotations

from enum import Enum

from streams.wire.records import SUBAGENT_PREFIX, ChatMessage, SessionEnd


class Disposition(Enum):
    KEEP = "keep"  # an ordinary conversation: store as is
    REROUTE = "reroute"  # sub-agent chat: re-key to the parent conversation
    DROP = "drop"  # sub-agent non-chat: counted, not stored


def is_virtual(conversation_id: str) -> bool:
    return conversation_id.startswith(SUBAGENT_PREFIX)


def is_chat(message: ChatMessage) -> bool:
    """User or assistant text; an assistant turn that only calls tools is not chat."""
    return (
        message.role in ("user", "assistant")
        and bool(message.content.strip())
        and not message.tool_calls
    )


def disposition(event: ChatMessage | SessionEnd) -> Disposition:
    if not is_virtual(event.conversation_id):
        return Disposition.KEEP
    if isinstance(event, ChatMessage) and is_chat(event):
        parent = event.parent_conversation_id
        # nested sub-agents reach their top conversation only through their own parent
        if parent and not is_virtual(parent):
            return Disposition.REROUTE
    return Disposition.DROP


def as_parent_message(message: ChatMessage) -> ChatMessage:
    """The copy stored in the parent conversation (``parent_conversation_id`` is set by the schema
    rule).
    """
    parent = message.parent_conversation_id
    if parent is None or is_virtual(parent):
        raise ValueError(f"no usable parent conversation for {message.conversation_id!r}")
    return message.model_copy(update={"conversation_id": parent, "parent_conversation_id": None})
