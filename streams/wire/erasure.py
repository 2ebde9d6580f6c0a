"""Wire records of erasure: requests on the compacted ``memory.erasures`` topic,
the receipt each request gets on the reply topic its headers name (the Spring
headers of a query), and the fence memstream sends itself through the ingest
stage. A receipt says how many rows, keys and copies went from each store; it
never carries content.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints, model_validator

from streams.wire.records import Ident, StorableAwareTime, TenantId

ErasureTarget = Literal["user", "conversation", "memory", "tenant"]
ERASURE_TARGETS: tuple[str, ...] = ("user", "conversation", "memory", "tenant")
ErasureId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")]
ProviderName = Literal["MEMOS", "MEM0", "MYSQL"]  # the order of AgentConfigValue (typing caches it)
# which field names the subject of each target
SUBJECT_FIELD: dict[str, str | None] = {
    "user": "user_id", "conversation": "conversation_id", "memory": "memory_id", "tenant": None}


class ErasureRequest(BaseModel):
    """Forget a user, a conversation, one memory or a whole tenant. Key:
    ``{tenant_id}/{erasure_id}`` (the topic is compacted: a request is only ever
    replaced by itself). Repeating a request (same tenant and ``erasure_id``) changes
    nothing and gets the first receipt again. Unknown fields are refused: a
    misspelt ``dry_run`` must not erase."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    erasure_id: ErasureId = Field(description=(
        "Idempotency key chosen by the requester (letters, digits, `.`, `_`, `:`, `-`; "
        "at most 64 characters)."))
    tenant_id: TenantId
    target: ErasureTarget = Field(description=(
        "`user`: everything of `user_id` in the tenant; `conversation`: one conversation, "
        "every speaker; `memory`: one long-term memory; `tenant`: everything of the tenant."))
    user_id: Ident | None = Field(None, description="Required for `user`.")
    conversation_id: Ident | None = Field(None, description="Required for `conversation`.")
    memory_id: Annotated[str, StringConstraints(min_length=1, max_length=255)] | None = Field(
        None, description="Required for `memory`: the id a reply's `memories` gives.")
    provider: ProviderName | None = Field(None, description=(
        "For `memory`: the provider holding it, when the id alone is ambiguous."))
    dry_run: bool = Field(False, description="Count what would go; change nothing.")
    reference: str | None = Field(None, max_length=128, description=(
        "The requester's reference (a ticket number), kept with the erasure record."))

    @model_validator(mode="after")
    def _subject_given(self) -> ErasureRequest:
        wanted = SUBJECT_FIELD[self.target]
        for name in ("user_id", "conversation_id", "memory_id"):
            given = getattr(self, name) is not None
            if name == wanted and not given:
                raise ValueError(f"target {self.target!r} needs {name}")
            if name != wanted and given:
                raise ValueError(f"target {self.target!r} takes no {name}")
        if self.provider is not None and self.target != "memory":
            raise ValueError("provider is only for target 'memory'")
        return self

    @property
    def subject(self) -> str:
        """The id the target names (the tenant id for ``tenant``)."""
        name = SUBJECT_FIELD[self.target]
        value = getattr(self, name) if name is not None else self.tenant_id
        return str(value)

    def key(self) -> bytes:
        return f"{self.tenant_id}/{self.erasure_id}".encode()


class ErasureError(BaseModel):
    code: Literal["bad_request", "not_found", "conflict", "unauthorized", "over_quota",
                  "provider", "database", "internal"] = Field(description=(
        "Why the request was `rejected` (`bad_request`, `not_found`, `conflict`, "
        "`unauthorized`, `over_quota`: its tenant's erasure requests are over their quota "
        "a minute, nothing was erased, send it again later) or the erasure is `blocked`: "
        "`provider` (a provider refused for good or is not configured), `database` (the "
        "database refused one of its statements for good: a constraint, a value a column "
        "cannot hold), `internal`."))
    message: str


class ErasureReceipt(BaseModel):
    """The answer to an erasure request: what went from each store (counts only)."""

    erasure_id: str | None = None
    tenant_id: str | None = None
    target: str | None = None
    subject: str | None = Field(None, description="The user, conversation or memory id.")
    status: Literal["done", "dry_run", "rejected", "blocked"] = Field(description=(
        "`done`; `dry_run` (counted only); `rejected` (a bad request: `error` says why); "
        "`blocked`: a provider refused for good or is not configured, the database refused "
        "a statement for good, or a fault of memstream's own; the erasure stays unfinished "
        "(recorded `blocked` with the error) and the same request starts it again "
        "(`error` says which)."))
    cutoff: datetime | None = Field(None, description=(
        "Events of the subject up to this time (and up to the recorded chat-topic offsets) "
        "are erased, and skipped when a topic is replayed."))
    counts: dict[str, int] = Field(default_factory=dict, description=(
        "Per store: rows deleted per table, `redis_keys`, `sessions_table` (tombstones), "
        "`memos` / `mem0` (copies deleted). A dry run counts what would go."))
    started_at: datetime | None = None
    finished_at: datetime | None = None
    warnings: list[str] = Field(default_factory=list, description=(
        "What memstream could not reach, e.g. a provider's own history of deleted texts."))
    error: ErasureError | None = None


class ErasureFence(BaseModel):
    """Internal, on ``memory.session-idle`` (one per partition): the ingest stage takes
    the erasure in (events it covers are skipped from then on), tombstones the
    sessions-table entries of the conversations that go whole and live in this
    partition, and records that the partition passed the fence. A user erasure's
    conversations that go whole are tombstoned at its second round, from the list
    the erasure recorded once every partition had passed the first."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    type: Literal["erasure_fence"]
    seq: int = Field(ge=1, description="The erasure's record.")
    erasure_id: ErasureId
    tenant_id: TenantId
    target: ErasureTarget
    subject: str
    cutoff: StorableAwareTime
    chat_offsets: dict[int, int] = Field(default_factory=dict, description=(
        "Per chat-topic partition, the end offset when the erasure was recorded."))
    partition: int = Field(ge=0)
    issued_at: AwareDatetime
    round: int = Field(1, ge=1, le=2, description=(
        "1: take the erasure in; 2 (a user erasure): delete the session states of the "
        "conversations it takes whole, as the erasure recorded them."))
