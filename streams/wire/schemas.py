"""JSON Schemas (draft 2020-12) generated from the wire records."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from streams.wire.erasure import ErasureFence, ErasureReceipt, ErasureRequest
from streams.wire.query import MemoryQuery, MemoryReply
from streams.wire.records import AgentConfigValue, ChatEvent, IdleCheck, SessionClosed

DRAFT = "https://json-schema.org/draft/2020-12/schema"
BASE = "https://memstream.dev/schemas/"


def _doc(schema: dict[str, Any], name: str, title: str, description: str) -> dict[str, Any]:
    return {
        "$schema": DRAFT, "$id": BASE + name, "title": title, "description": description, **schema
    }


def all_schemas() -> dict[str, dict[str, Any]]:
    return {
        "chat-message.schema.json": _doc(
            TypeAdapter(ChatEvent).json_schema(),
            "chat-message.schema.json",
            "chat.messages event",
            "A value on the chat topic (key: conversation id): a chat message or a session end.",
        ),
        "session-closed.schema.json": _doc(
            SessionClosed.model_json_schema(),
            "session-closed.schema.json",
            "memory.session-closed event",
            "One session end (explicit or by inactivity), keyed by conversation id.",
        ),
        "session-idle.schema.json": _doc(
            TypeAdapter(IdleCheck | ErasureFence).json_schema(),
            "session-idle.schema.json",
            "memory.session-idle event",
            "Internal: an idle check from the session scan (keyed by conversation id), or an "
            "erasure's fence (type erasure_fence, one per partition).",
        ),
        "agent-config.schema.json": _doc(
            AgentConfigValue.model_json_schema(),
            "agent-config.schema.json",
            "memory.agent-config value",
            "An agent's memory configuration on the compacted topic, keyed "
            "\"{tenant_id}/{agent_id}\"; a null value removes it.",
        ),
        "memory-query.schema.json": _doc(
            MemoryQuery.model_json_schema(),
            "memory-query.schema.json",
            "memory.queries request",
            "A memory lookup, keyed \"{tenant_id}/{user_id}\". The reply topic and correlation "
            "id travel in the Kafka headers kafka_replyTopic, kafka_correlationId and optional "
            "kafka_replyPartition (4-byte big-endian int), as Spring's ReplyingKafkaTemplate "
            "sets them.",
        ),
        "erasure-request.schema.json": _doc(
            ErasureRequest.model_json_schema(),
            "erasure-request.schema.json",
            "memory.erasures request",
            "Erase a user, a conversation, one memory or a tenant; keyed "
            "\"{tenant_id}/{target}:{subject}\" on the compacted topic. A receipt goes to the "
            "topic of the kafka_replyTopic header, with kafka_correlationId, as for a query.",
        ),
        "erasure-receipt.schema.json": _doc(
            ErasureReceipt.model_json_schema(),
            "erasure-receipt.schema.json",
            "erasure receipt",
            "What an erasure deleted from each store (counts only, never content).",
        ),
        "memory-reply.schema.json": _doc(
            MemoryReply.model_json_schema(),
            "memory-reply.schema.json",
            "memory reply",
            "The one reply to a memory lookup, sent to the request's reply topic with the "
            "request's kafka_correlationId header unchanged.",
        ),
    }
