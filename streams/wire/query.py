"""Wire records of the memory lookup: requests on ``memory.queries`` and the
replies sent to the topic each request names (Spring Kafka's
``kafka_replyTopic`` header)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from streams.wire.records import AgentId, Ident, TenantId

# the longest a caller may wait (``options.timeout_ms``); an older request is never answered
MAX_TIMEOUT_MS = 60_000


def _nullable_optionals(schema: dict[str, Any]) -> None:
    """The JSON Schema says what the model accepts: ``null`` for every optional field."""
    required = set(schema.get("required", ()))
    for name, prop in schema.get("properties", {}).items():
        if name in required or {"type": "null"} in prop.get("anyOf", ()):
            continue
        kept = {k: prop.pop(k) for k in ("default", "description", "title") if k in prop}
        inner = dict(prop)
        prop.clear()
        prop.update(kept, anyOf=[inner, {"type": "null"}])


class _Lenient(BaseModel):
    """Unknown fields are ignored (the reply names them in ``warnings``) and
    ``null`` stands for "not given" wherever a field is optional, as Jackson
    writes unset fields by default."""

    model_config = ConfigDict(extra="ignore", frozen=True, json_schema_extra=_nullable_optionals)

    @model_validator(mode="before")
    @classmethod
    def _null_is_absent(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return {k: v for k, v in value.items()
                if not (v is None and k in cls.model_fields
                        and not cls.model_fields[k].is_required())}


class QueryOptions(_Lenient):

    top_k: int = Field(10, ge=1, le=100, description="Long-term memories listed in `memories`.")
    just_keyword_search: bool = Field(
        False, description="Keyword-only retrieval (no dense similarity)."
    )
    include_short_term: bool = Field(
        True, description="Include the Session window of `conversation_id`."
    )
    last_n: int | None = Field(
        None, ge=1, le=1000, description="Newest messages the Session window considers."
    )
    long_memory_token_budget: int = Field(
        4000, ge=0, le=32000, description="Tokens for `user_profile` + `agent_memory`."
    )
    timeout_ms: int = Field(
        1000, ge=10, le=MAX_TIMEOUT_MS,
        description="Deadline of each part (short-term, long-term), and how long the caller "
        "waits: a request older than this (by its record timestamp) when the worker takes it "
        "is not answered.",
    )


class MemoryQuery(_Lenient):
    """A memory lookup by an agent about to answer. Key: ``tenant_id/user_id``."""

    request_id: str | None = Field(None, max_length=128, description="Echoed in the reply.")
    tenant_id: TenantId
    user_id: Ident
    agent_id: AgentId
    conversation_id: Ident | None = None
    message: str = Field(min_length=1, max_length=65536, description="The user's new message.")
    context: str | None = Field(
        None,
        max_length=65536,
        description="Optional context; its first 200 characters join the query.",
    )
    options: QueryOptions = QueryOptions()


def unknown_fields(doc: dict[str, Any]) -> list[str]:
    """The fields of a request that no version of memstream reads (ignored)."""
    out = [k for k in doc if k not in MemoryQuery.model_fields]
    options = doc.get("options")
    if isinstance(options, dict):
        out += [f"options.{k}" for k in options if k not in QueryOptions.model_fields]
    return out


class ReplyMemory(BaseModel):
    id: str
    content: str
    score: float
    cube: str
    type: str
    kind: str = "fact"
    event_time: str | None = None
    source_event_ids: list[str] = Field(default_factory=list)
    source_span: list[int] | None = Field(None, min_length=2, max_length=2, description=(
        "A passage of a long message: its character offsets in the content of its one "
        "source message (start, end exclusive). Null: the memory is the whole message, or "
        "not a part of one."))
    covers: list[str] = Field(default_factory=list, description=(
        "Memories judged from the same messages as this one (the facts judged from an "
        "episode, or the episode a fact was judged from), left out for it: a fact and its "
        "episode never both take a place. The one that scored higher is kept; on a tie, "
        "the fact."))


class ReplyError(BaseModel):
    code: Literal["bad_request", "internal", "timeout", "unauthorized", "over_quota"] = Field(
        description="`over_quota`: the tenant's queries are over its quota on the worker that "
        "took the request; not answered, the message says which quota and when to retry.")
    message: str


class Warning_(BaseModel):
    model_config = ConfigDict(title="Warning")

    code: str
    message: str


class BudgetInfo(BaseModel):
    tokens: int = Field(description="The budget asked for.")
    tokens_used: int
    memory_ids: list[str] = Field(
        default_factory=list, description="Memories inside the budget text."
    )
    source_event_ids: list[str] = Field(default_factory=list, description="Their source events.")


class LongTermInfo(BaseModel):
    provider: str | None = None
    skipped: str | None = Field(
        None, description="Why long-term memory was not searched, if it was not."
    )
    keyword_only: bool = False
    candidates: int = 0
    ranked_by: Literal["relevance", "strength"] = Field("relevance", description=(
        "`strength` for a query that names nothing to look for (\"What do you know about "
        "me?\"): each cube's strongest memories (facts first, then importance, then the "
        "newest) instead of the ones matching its words."))
    outline: bool = Field(False, description=(
        "true for a query that asks how something went over time (\"in what order did I…\", "
        "\"summarize how my … progressed\"): each memory's `content` is one sentence of it, "
        "the one holding most of the query's words, after its speaker's name, at most "
        "`outline_chars` characters, so the budget holds a line of many sessions "
        "instead of a few whole; its `id` and `source_span` lead to the whole text."))


class MemoryReply(BaseModel):
    """The one reply every request with a reply topic gets."""

    request_id: str | None = None
    tenant_id: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    conversation_id: str | None = None
    user_profile: str = ""
    agent_memory: str = ""
    memories: list[ReplyMemory] = Field(default_factory=list)
    short_term: dict[str, Any] | None = None
    summary: str | None = None
    budget: BudgetInfo | None = None
    long_term: LongTermInfo = LongTermInfo()
    warnings: list[Warning_] = Field(default_factory=list)
    latency_ms: float = 0.0
    error: ReplyError | None = None
