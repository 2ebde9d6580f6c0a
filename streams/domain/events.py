"""Decoding chat events from raw Kafka values, with a reason for every rejection.

Bad input is never dropped silently: :func:`decode_chat_event` returns either a
validated record or a :class:`Rejected` naming one of a small, fixed set of
reasons (used as a metric label and a dead-letter header).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from pydantic import TypeAdapter, ValidationError

from streams.records import EVENT_TYPES, ChatEvent, ChatMessage, SessionEnd

UNDECODABLE: Final = "undecodable"
MISSING_TENANT: Final = "missing_tenant"
UNKNOWN_TYPE: Final = "unknown_type"
TOO_LARGE: Final = "too_large"
SCHEMA: Final = "schema"
REASONS: Final = (UNDECODABLE, MISSING_TENANT, UNKNOWN_TYPE, TOO_LARGE, SCHEMA)

_adapter: TypeAdapter[ChatMessage | SessionEnd] = TypeAdapter(ChatEvent)


@dataclass(frozen=True, slots=True)
class Rejected:
    reason: str
    error_class: str
    message: str


def decode_chat_event(
    raw: bytes | None, max_content_bytes: int
) -> ChatMessage | SessionEnd | Rejected:
    """Decode one ``chat.messages`` value.

    Checks run in a fixed order so each input gets exactly one reason:
    undecodable (not UTF-8 JSON of an object) → missing_tenant → unknown_type →
    too_large (``content`` over ``max_content_bytes`` UTF-8 bytes) → schema.
    """
    if raw is None:
        return Rejected(UNDECODABLE, "EmptyValue", "the record has no value")
    try:
        doc = json.loads(raw)
    except UnicodeDecodeError as exc:
        return Rejected(UNDECODABLE, type(exc).__name__, f"value is not UTF-8: {exc.reason}")
    except ValueError as exc:
        return Rejected(UNDECODABLE, type(exc).__name__, f"value is not JSON: {exc}")
    if not isinstance(doc, dict):
        return Rejected(
            UNDECODABLE, "NotAnObject", f"value is JSON {type(doc).__name__}, not an object"
        )
    tenant = doc.get("tenant_id")
    if tenant is None or tenant == "":
        return Rejected(MISSING_TENANT, "MissingTenant", "tenant_id is missing or empty")
    kind = doc.get("type")
    if kind not in EVENT_TYPES:
        return Rejected(
            UNKNOWN_TYPE, "UnknownType", f"type {kind!r} is not one of {list(EVENT_TYPES)}"
        )
    content = doc.get("content")
    if isinstance(content, str) and len(content) * 4 > max_content_bytes:
        size = len(content.encode("utf-8"))
        if size > max_content_bytes:
            return Rejected(
                TOO_LARGE,
                "ContentTooLarge",
                f"content is {size} bytes, the limit is {max_content_bytes}",
            )
    try:
        return _adapter.validate_python(doc)
    except ValidationError as exc:
        return Rejected(SCHEMA, "ValidationError", _short_errors(exc))


def _short_errors(exc: ValidationError, limit: int = 3) -> str:
    parts = []
    for err in exc.errors()[:limit]:
        loc = ".".join(str(p) for p in err["loc"][1:] or err["loc"])
        parts.append(f"{loc}: {err['msg']}")
    more = exc.error_count() - limit
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")
