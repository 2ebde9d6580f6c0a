"""Decoding records from raw Kafka values, with a reason for every rejection.

Bad input is never dropped silently: :func:`decode_chat_event` (and
:func:`decode_record` for memstream's internal topics) returns either a
validated record or a :class:`Rejected` naming one of a small, fixed set of
reasons (used as a metric label and a dead-letter header; see
:mod:`streams.wire.rejections`). Neither raises, whatever the bytes.

What is accepted is what the sinks can take: every string is Unicode text
(no lone surrogates), the nesting is bounded, every date-time converts to UTC
inside what MySQL DATETIME holds, ``content`` and ``tool_calls`` fit their
columns, and every id fits its column (the lengths in ``streams/wire/records.py``
are those of ``conversation_message`` in ``streams/adapters/db/schema/conversation.py``).
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from streams.wire.erasure import ErasureFence
from streams.wire.json_doc import MAX_DEPTH, load_object
from streams.wire.records import (
    EVENT_TYPES,
    TENANT_PATTERN,
    ChatEvent,
    ChatMessage,
    IdleCheck,
    SessionEnd,
)
from streams.wire.rejections import (
    BAD_ID,
    BAD_TIME,
    INVALID_TEXT,
    MISSING_TENANT,
    OUT_OF_RANGE,
    REASONS,
    SCHEMA,
    TOO_DEEP,
    TOO_LARGE,
    UNDECODABLE,
    UNKNOWN_TYPE,
    UNSTORABLE,
    Rejected,
)

__all__ = [
    "BAD_ID", "BAD_TIME", "INVALID_TEXT", "MAX_DEPTH", "MISSING_TENANT", "OUT_OF_RANGE",
    "REASONS", "SCHEMA", "TOO_DEEP", "TOO_LARGE", "UNDECODABLE", "UNKNOWN_TYPE", "UNSTORABLE",
    "Rejected",
    "decode_chat_event", "decode_idle_record", "decode_record", "tenant_of",
]

M = TypeVar("M", bound=BaseModel)
_TENANT = re.compile(TENANT_PATTERN)

_adapter: TypeAdapter[ChatMessage | SessionEnd] = TypeAdapter(ChatEvent)
# validation errors whose type is itself a reason (raised by the models' own rules)
_REASON_ERRORS = frozenset({OUT_OF_RANGE, TOO_LARGE, BAD_TIME, BAD_ID})


def tenant_of(raw: bytes | None) -> str | None:
    """The tenant a chat event's value names, or None when it names no valid tenant id
    (or is not a JSON object): only what a quota needs before the event is decoded
    (which refuses the same events)."""
    doc = load_object(raw)
    if isinstance(doc, Rejected):
        return None
    tenant = doc.get("tenant_id")
    if not isinstance(tenant, str) or _TENANT.fullmatch(tenant) is None:
        return None
    return tenant


def decode_chat_event(
    raw: bytes | None, max_content_bytes: int, *, max_depth: int = MAX_DEPTH
) -> ChatMessage | SessionEnd | Rejected:
    """Decode one ``chat.messages`` value.

    Checks run in a fixed order so each input gets exactly one reason:
    undecodable → too_deep → invalid_text (:func:`~streams.wire.json_doc.load_object`)
    → missing_tenant → unknown_type → too_large (``content`` over
    ``max_content_bytes`` UTF-8 bytes) → the model: out_of_range (``created_at``),
    too_large (``tool_calls`` over 65,535 bytes as JSON), schema (anything else).
    """
    doc = load_object(raw, max_depth=max_depth)
    if isinstance(doc, Rejected):
        return doc
    tenant = doc.get("tenant_id")
    if tenant is None or tenant == "":
        return Rejected(MISSING_TENANT, "MissingTenant", "tenant_id is missing or empty")
    kind = doc.get("type")
    if not isinstance(kind, str) or kind not in EVENT_TYPES:
        return Rejected(
            UNKNOWN_TYPE, "UnknownType", f"type {_short(kind)} is not one of {list(EVENT_TYPES)}"
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
        return invalid(exc, skip=1)  # the first location is the union's tag


def decode_record(raw: bytes | None, model: type[M], *, max_depth: int = MAX_DEPTH) -> M | Rejected:
    """One record of an internal topic (an idle check, a session end to consolidate):
    the same document checks as a chat event, then ``model``'s validation."""
    doc = load_object(raw, max_depth=max_depth)
    if isinstance(doc, Rejected):
        return doc
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        return invalid(exc)


def decode_idle_record(raw: bytes | None) -> IdleCheck | ErasureFence | Rejected:
    """One record of the idle topic: an idle check, or (``type: erasure_fence``) an
    erasure's fence."""
    doc = load_object(raw)
    if isinstance(doc, Rejected):
        return doc
    model: type[IdleCheck | ErasureFence] = (
        ErasureFence if doc.get("type") == "erasure_fence" else IdleCheck)
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        return invalid(exc)


def invalid(exc: ValidationError, *, skip: int = 0) -> Rejected:
    """The rejection for a failed validation: out_of_range or too_large when every
    error is of that kind, schema otherwise."""
    kinds = {str(err["type"]) for err in exc.errors()}
    reason = next(iter(kinds)) if len(kinds) == 1 and kinds <= _REASON_ERRORS else SCHEMA
    return Rejected(reason, "ValidationError", _short_errors(exc, skip))


def _short(value: Any, limit: int = 60) -> str:
    text = ascii(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _short_errors(exc: ValidationError, skip: int, limit: int = 3) -> str:
    parts = []
    for err in exc.errors()[:limit]:
        loc = ".".join(str(p) for p in err["loc"][skip:] or err["loc"])
        parts.append(f"{loc}: {err['msg']}")
    more = exc.error_count() - limit
    return "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")
