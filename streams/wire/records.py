"""Wire records: the JSON every memstream topic carries.

These models are the source of the JSON Schemas under ``schemas/``
(``memstream schemas export`` writes them; a test checks they are current), so
producers in any language can follow the same contract.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
RFC3339_PATTERN = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})$"
)
_rfc3339 = re.compile(RFC3339_PATTERN)
_no_seconds = re.compile(r"^(.{10}[Tt ][0-9]{2}:[0-9]{2})([Zz]|[+-][0-9]{2}:[0-9]{2})$")
EPOCH_MILLIS_FROM = 1e11  # a number this large is milliseconds (as seconds: the year 5138)
TIME_FORMS = ("an RFC 3339 date-time with an offset (seconds optional, as java.time's "
              "toString() writes them), or a number of seconds (Jackson's default for "
              "Instant) or milliseconds since the epoch")


def event_time(v: object) -> object:
    """``created_at`` as producers write it, for the model to validate: RFC 3339
    text (``06:48Z`` gets its ``:00``), or epoch seconds / milliseconds.
    Raises ``bad_time`` for anything else."""
    if isinstance(v, datetime):
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        try:
            seconds = v / 1000 if abs(v) >= EPOCH_MILLIS_FROM else v
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            raise PydanticCustomError(
                "out_of_range", "the date-time is outside 1000-01-01 to 9999-12-31 UTC") from None
    if isinstance(v, str) and _rfc3339.fullmatch(v):
        m = _no_seconds.fullmatch(v)
        return f"{m.group(1)}:00{m.group(2)}" if m else v
    raise PydanticCustomError("bad_time", "created_at must be {forms}", {"forms": TIME_FORMS})
SUBAGENT_PREFIX = "agent:"

TenantId = Annotated[str, StringConstraints(pattern=TENANT_PATTERN)]
MAX_ID_LEN = 255  # user, agent and conversation ids
AGENT_CUBE_PREFIX = "agent_"  # an agent's cube is this and its id (streams.memory.model)
MAX_AGENT_ID_LEN = MAX_ID_LEN - len(AGENT_CUBE_PREFIX)  # its cube's name fits the column
TRIMMED_PATTERN = r"^\S(?:[\s\S]*\S)?$"
BAD_ID_MESSAGE = "ids may not begin or end with whitespace (they are compared exactly)"


def _trimmed(value: str) -> str:
    """An id as stored and compared: nothing at either end that a database (MySQL
    ignores trailing spaces) or a provider would strip or compare away."""
    if value != value.strip():
        raise PydanticCustomError("bad_id", BAD_ID_MESSAGE)
    return value


Label = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_LEN)]
"""A name or an opaque id memstream stores as given and never looks up by."""
Ident = Annotated[str, StringConstraints(min_length=1, max_length=MAX_ID_LEN),
                  AfterValidator(_trimmed), Field(json_schema_extra={"pattern": TRIMMED_PATTERN})]
AgentId = Annotated[str, StringConstraints(min_length=1, max_length=MAX_AGENT_ID_LEN),
                    AfterValidator(_trimmed),
                    Field(json_schema_extra={"pattern": TRIMMED_PATTERN})]
EventId = Annotated[str, StringConstraints(min_length=1, max_length=128)]
Role = Literal["user", "assistant", "system", "tool"]

# What the stores hold: MySQL DATETIME (and SQLite's text dates) from year 1000
# to 9999, and MySQL TEXT (the tool_calls column) up to 65,535 bytes.
DATETIME_MIN = datetime(1000, 1, 1, tzinfo=UTC)
DATETIME_MAX = datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)
TOOL_CALLS_MAX_BYTES = 65_535


def _storable_time(value: datetime) -> datetime:
    """A date-time the database can hold: convertible to UTC (a naive one is UTC)
    and inside DATETIME_MIN..DATETIME_MAX. The error type names the rejection reason."""
    try:
        utc = value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)
    except OverflowError:
        raise PydanticCustomError(
            "out_of_range", "the date-time cannot be represented in UTC") from None
    if not DATETIME_MIN <= utc <= DATETIME_MAX:
        raise PydanticCustomError(
            "out_of_range", "the date-time is outside 1000-01-01 to 9999-12-31 UTC")
    return value


StorableTime = Annotated[datetime, AfterValidator(_storable_time)]
StorableAwareTime = Annotated[AwareDatetime, AfterValidator(_storable_time)]



TRACE_LINKS_KEPT = 16
"""A session-closed event names at most this many of its messages' traces."""
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")

class _Event(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    event_id: EventId = Field(description="Idempotency key, unique per tenant.")
    tenant_id: TenantId = Field(description="Tenant; every row, key and lookup is scoped by it.")
    user_id: Ident
    agent_id: AgentId
    conversation_id: Ident = Field(
        description=(
            "Conversation; ids starting with `agent:` are a sub-agent's virtual conversation."
        )
    )
    created_at: StorableAwareTime = Field(
        description="RFC 3339 time the event happened, with offset (UTC years 1000 to 9999).",
        json_schema_extra={"pattern": RFC3339_PATTERN},
    )

    @field_validator("created_at", mode="before")
    @classmethod
    def _producer_time(cls, v: object) -> object:
        return event_time(v)


class ChatMessage(_Event):
    """One chat message."""

    model_config = ConfigDict(
        extra="ignore",
        frozen=True,
        json_schema_extra={
            "if": {
                "properties": {"conversation_id": {"pattern": "^agent:"}},
                "required": ["conversation_id"],
            },
            "then": {"required": ["parent_conversation_id"]},
        },
    )

    type: Literal["message"]
    role: Role
    content: str = Field(description="Message text (may be empty for a pure tool call).")
    name: Label | None = Field(None, description="Speaker name.")
    tool_calls: list[dict[str, Any]] | None = Field(
        None, description="OpenAI-style tool calls made by an assistant message "
        "(at most 65,535 bytes as JSON)."
    )
    tool_call_id: Label | None = Field(None, description="The call a `tool` message answers.")
    parent_conversation_id: Ident | None = Field(
        None,
        description=(
            "Required for a sub-agent's virtual conversation (`agent:` prefix): "
            "the conversation it serves."
        ),
    )

    @model_validator(mode="after")
    def _subagent_has_parent(self) -> ChatMessage:
        if self.conversation_id.startswith(SUBAGENT_PREFIX) and not self.parent_conversation_id:
            raise ValueError(
                "a sub-agent conversation (agent: prefix) needs parent_conversation_id"
            )
        return self

    @model_validator(mode="after")
    def _tool_calls_fit(self) -> ChatMessage:
        stored = self.tool_calls_json()
        if stored is not None:
            size = len(stored.encode("utf-8", "surrogatepass"))
            if size > TOOL_CALLS_MAX_BYTES:
                raise PydanticCustomError(
                    "too_large", "tool_calls are {size} bytes as JSON, the limit is {limit}",
                    {"size": size, "limit": TOOL_CALLS_MAX_BYTES})
        return self

    def tool_calls_json(self) -> str | None:
        """``tool_calls`` as the database stores them (JSON text); None without calls."""
        return json.dumps(self.tool_calls, ensure_ascii=False) if self.tool_calls else None


class SessionEnd(_Event):
    """Closes the conversation's current session."""

    type: Literal["session_end"]
    reason: str | None = Field(None, max_length=255)


ChatEvent = Annotated[ChatMessage | SessionEnd, Field(discriminator="type")]
EVENT_TYPES = ("message", "session_end")


class SessionClosed(BaseModel):
    """One session end, explicit or by inactivity, on ``memory.session-closed``
    (key: conversation id). A session end whose consolidation must be tried again
    travels unchanged on ``memory.retry``, with the headers ``memstream.attempt``
    and ``memstream.next_attempt_at`` (RFC 3339)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    closed_id: str = Field(description="Idempotency key: conversation, session number.")
    tenant_id: TenantId
    user_id: Ident
    agent_id: AgentId
    conversation_id: Ident
    trigger: Literal["explicit", "idle", "late"] = Field(description=(
        "`explicit` (a session_end), `idle` (inactivity), or `late`: messages of a session "
        "closed before they arrived (delivered again after records were passed over); "
        "its consolidation takes the session's messages no earlier run took."))
    session_seq: int = Field(ge=1, description="1 for the first session of the conversation.")
    closed_at: StorableTime
    last_activity: StorableTime
    message_count: int = Field(ge=0, description="Messages the session state had seen at close.")
    last_event_id: str | None = Field(
        None, description="Event id of the session's last message: consolidation takes the "
        "conversation's messages stored up to it (absent: those stored by `closed_at`).")
    trace_links: list[str] = Field(default_factory=list, description=(
        "W3C `traceparent` of the session's newest messages whose traces are sampled "
        "(at most 16): the consolidation run's span links to them. Empty when no "
        "producer traced them. What is not a traceparent is left out, and only the last "
        "16 are kept: a tracing field never refuses a record."))
    part: int = Field(1, ge=1, description=(
        "1 for a session end; a session with more messages than one run takes "
        "(`MEMSTREAM_CONSOLIDATION__MAX_MESSAGES`, `__MAX_BYTES`) is consolidated in parts, "
        "and part n + 1 (`closed_id` of part 1 followed by `+n+1`) is sent when part n is "
        "done."))

    @field_validator("trace_links", mode="before")
    @classmethod
    def _traceparents_only(cls, v: object) -> list[str]:
        if not isinstance(v, list):
            return []
        return [t for t in v if isinstance(t, str) and _TRACEPARENT.fullmatch(t)][
            -TRACE_LINKS_KEPT:]


class IdleCheck(BaseModel):
    """Internal, on ``memory.session-idle`` (key: conversation id): the session scan
    found this conversation's session idle. The ingest agent re-checks its state
    (a message may have arrived since) before closing it with trigger ``idle``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    tenant_id: TenantId
    conversation_id: Ident
    session_seq: int = Field(ge=1, description="The session the scan saw idle.")
    idle_for_s: float = Field(
        ge=0, allow_inf_nan=False, description="How long the scan saw it idle."
    )
    checked_at: StorableTime


class AgentConfigValue(BaseModel):
    """A value on the compacted ``memory.agent-config`` topic, keyed
    ``"{tenant_id}/{agent_id}"``. A null value (tombstone) removes the agent's
    configuration. ``longMemoryProvider``, ``openLongMemory`` and ``boundModel``
    are accepted as spellings too; an unreadable value routes to the built-in
    provider."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    long_memory_provider: Literal["MEMOS", "MEM0", "MYSQL"] | None = Field(
        None, description="Long-term memory provider; unset: the built-in MySQL provider."
    )
    open_long_memory: bool = Field(
        False, description="Long memory on; it also needs a bound model."
    )
    model: str | None = Field(None, description="The model bound to the agent.")
    updated_at: AwareDatetime | None = Field(None, description="When the configuration was set.")
    sensitive: dict[str, Literal["keep", "mask", "drop"]] | None = Field(None, description=(
        "The agent's sensitive-content policy, kind to action (kinds: secret, card, iban, "
        "national_id, email, phone, ip, name, location); a kind not named takes the "
        "deployment's action (MEMSTREAM_SENSITIVE__*)."))
