"""Runtime: the worker's shared resources (database engine, Redis, the one
HTTP client of every external call, stores, readers, memory providers and chat
models), started once and closed on shutdown. Domain code never reads
settings; the runtime hands it plain values."""

from __future__ import annotations

import asyncio
import logging
from functools import cached_property
from typing import TYPE_CHECKING

import httpx
from pydantic import SecretStr
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.engine import create_engine, is_sqlite
from streams.adapters.db.erasure_log import TableErasureLog
from streams.adapters.db.messages import MessageStore
from streams.adapters.db.migrate import upgrade
from streams.adapters.db.stale_marks import StaleMarkStore
from streams.adapters.embeddings.embedders import Embedder, LocalEmbedder, limit_blas_threads
from streams.adapters.http.client import RetryPolicy
from streams.adapters.http.openai_compat import ChatModel, OpenAIEmbedder
from streams.adapters.redis.conversation_cache import ConversationCache
from streams.consolidation.rules.dedup import normalize
from streams.consolidation.sensitive_counts import SensitiveCounts
from streams.erasure.model import ErasureMark
from streams.erasure.registry import ErasureRegistry
from streams.erasure.rules.held import held_scopes
from streams.memory.providers.mem0 import Mem0Provider
from streams.memory.providers.memos import MemOSProvider
from streams.memory.registry import ModelFactory, ProviderHandle, ProviderRegistry
from streams.memory.rules.fusion import FusionWeights, Ramp
from streams.memory.rules.recency import Recency
from streams.model_usage.book import UsageBook
from streams.model_usage.meter import ModelMeter
from streams.model_usage.rules import LabelPolicy, Price
from streams.session.reader import SessionReader
from streams.session.stale import StaleHistories
from streams.settings import Settings
from streams.tokens import MEMO_TEXTS, TokenCounter
from streams.worker import telemetry

if TYPE_CHECKING:
    from streams.adapters.sensitive.scanner import SensitiveScanner
    from streams.memory.providers.builtin.held_reads import HeldReads
    from streams.memory.providers.builtin.provider import BuiltinProvider

log = logging.getLogger(__name__)


def create_redis(settings: Settings) -> Redis | None:
    if settings.redis.url is None:
        return None
    return Redis.from_url(
        settings.redis.url.get_secret_value(),
        socket_timeout=settings.redis.timeout_s,
        socket_connect_timeout=settings.redis.timeout_s,
        health_check_interval=0,
    )


class Runtime:
    def __init__(self, settings: Settings, *, migrate: bool) -> None:
        """``migrate``: upgrade the schema when started; the worker's runtime does
        not (``memstream worker`` has migrated, or checked, before Faust starts)."""
        self.settings = settings
        self.migrate = migrate
        self._lock = asyncio.Lock()
        self._started = False
        self._engine: AsyncEngine | None = None
        self._redis: Redis | None = None
        self._http: httpx.AsyncClient | None = None
        self._held_engine: AsyncEngine | None = None

    async def start(self) -> Runtime:
        async with self._lock:
            if self._started:
                return self
            telemetry.configure()
            self._engine = create_engine(self.settings.database)
            telemetry.instrument_engine(self._engine)
            if self.migrate:
                await upgrade(self._engine)
            self._redis = create_redis(self.settings)
            self._http = httpx.AsyncClient(
                limits=httpx.Limits(max_connections=100, max_keepalive_connections=20))
            telemetry.instrument_http(self._http)
            self._started = True
            return self

    async def stop(self) -> None:
        async with self._lock:
            if self._redis is not None:
                await self._redis.aclose()
            if self._http is not None:
                await self._http.aclose()
                self._http = None
            if self.__dict__.get("sensitive") is not None:
                self.sensitive.close()  # type: ignore[union-attr]
                del self.__dict__["sensitive"]
            for provider in self._builtin_providers():
                await provider.close()  # its held connection, before the engines go
            if self._held_engine is not None:
                await self._held_engine.dispose()
                self._held_engine = None
            if self._engine is not None:
                await self._engine.dispose()
            await asyncio.to_thread(telemetry.flush)
            self._started = False

    @property
    def engine(self) -> AsyncEngine:
        if self._engine is None:
            raise RuntimeError("runtime not started")
        return self._engine

    @property
    def redis(self) -> Redis | None:
        return self._redis

    @cached_property
    def tokens(self) -> TokenCounter:
        # the budget lines of the memories the worker holds (counted as their scopes are
        # read: streams.query.line_counts), and as many other texts as by default
        return TokenCounter(self.settings.window.encoding,
                            cache_size=MEMO_TEXTS + self.settings.query.scope_cache_memories)

    @cached_property
    def store(self) -> MessageStore:
        return MessageStore(self.engine)

    @cached_property
    def cache(self) -> ConversationCache:
        r = self.settings.redis
        return ConversationCache(
            self._redis,
            prefix=r.key_prefix,
            history_max=r.history_max,
            history_ttl_s=r.history_ttl_s,
            summary_ttl_s=r.summary_ttl_s,
            retry_after_s=r.retry_after_s,
        )

    @cached_property
    def stale(self) -> StaleHistories:
        """The stale-history marks, shared by the ingest writer and the reader."""
        i = self.settings.ingest
        return StaleHistories(self.cache, StaleMarkStore(self.engine),
                              retry_initial_s=i.retry_initial_s, retry_max_s=i.retry_max_s,
                              lookup_timeout_s=self.settings.redis.stale_check_timeout_s)

    @cached_property
    def reader(self) -> SessionReader:
        w = self.settings.window
        return SessionReader(
            self.store,
            self.cache,
            self.tokens,
            stale=self.stale,
            max_token_window=w.max_token_window,
            summary_token_budget=w.summary_token_budget,
            default_last_n=w.default_last_n,
            enforce_alternation=w.enforce_alternation,
        )

    @property
    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            raise RuntimeError("runtime not started")
        return self._http

    def provider_retry(self) -> RetryPolicy:
        c = self.settings.consolidation
        return RetryPolicy(attempts=c.provider_attempts, initial_s=c.provider_backoff_initial_s,
                           max_s=c.provider_backoff_max_s)

    @cached_property
    def embedder(self) -> Embedder | None:
        """Dense similarity for the built-in provider; None means lexical only."""
        e = self.settings.embedding
        if e.kind == "local":
            return LocalEmbedder()
        if e.kind == "openai":
            if not e.base_url:
                raise ValueError("MEMSTREAM_EMBEDDING__BASE_URL is required for kind openai")
            return OpenAIEmbedder(self.http, e.base_url, e.model, api_key=_secret(e.api_key),
                                  dim=e.dim, timeout_s=e.timeout_s, meter=self.model_meter)
        return None

    @cached_property
    def providers(self) -> ProviderRegistry:
        """The built-in provider always; MemOS and Mem0 when their URLs are set."""
        from streams.memory.providers.builtin.provider import BuiltinProvider
        from streams.memory.providers.builtin.unheld import UnheldLimits
        from streams.query.line_counts import BudgetLineCounts

        s, c = self.settings, self.settings.consolidation
        # numpy's BLAS would start a thread per core for every matrix product and keep
        # it spinning: with the event loop, the database and Kafka on the same cores,
        # one thread is faster (measured: docs/retrieval.md)
        limit_blas_threads(1)
        r, held = s.ranking, s.query.scope_cache_memories
        builtin = BuiltinProvider(
            self.engine, embedder=self.embedder,
            weights=FusionWeights(
                dense=r.dense_weight, lexical=round(1 - r.dense_weight, 6),
                neighbour=r.neighbour_weight, session=r.session_weight, person=r.person_weight,
                passage_decay=r.passage_decay, assistant=r.assistant_weight,
                instruction=r.instruction_floor),
            ramp=Ramp(*r.dense_floor, *r.lexical_floor),
            recency=Recency(depth=r.recency_depth, band=r.recency_band),
            ann_min_vectors=s.embedding.ann_min_vectors,
            vector_cache_rows=held, row_cache_rows=held, cache_postings=20 * held,
            scope_hold_max=s.query.scope_hold_max,
            unheld=UnheldLimits(s.query.unheld_term_postings, s.query.unheld_recent_vectors,
                                s.query.unheld_kind_memories),
            rows_read=BudgetLineCounts(self.tokens, s.query.max_memory_chars),
            held_reads=self._held_reads())
        handles = {"mysql": ProviderHandle("mysql", builtin, atomic_batch=True,
                                           episodes=c.episodes_builtin, idempotent_add=True)}
        if s.memos.base_url:
            handles["memos"] = ProviderHandle("memos", MemOSProvider(
                self.http, s.memos.base_url, api_key=_secret(s.memos.api_key),
                timeout_s=s.memos.timeout_s, retry=self.provider_retry(), mode=s.memos.mode,
                verify_writes=s.memos.verify_writes,
                lexical_weight=s.query.provider_lexical_weight),
                episodes=c.episodes_external)
        if s.mem0.base_url:
            handles["mem0"] = ProviderHandle("mem0", Mem0Provider(
                self.http, s.mem0.base_url, api_key=_secret(s.mem0.api_key),
                timeout_s=s.mem0.timeout_s, retry=self.provider_retry(),
                lexical_weight=s.query.provider_lexical_weight),
                episodes=c.episodes_external)
        return ProviderRegistry(handles)

    @cached_property
    def erasures(self) -> ErasureRegistry:
        """The erasures this process knows; a finished one drops what it names from the
        caches."""
        registry = ErasureRegistry(TableErasureLog(self.engine))
        registry.on_finished(self.drop_caches)
        return registry

    def drop_caches(self, erased: ErasureMark | None = None) -> None:
        """Drop what this process holds of what the erasure ``erased`` removed (None:
        of any erasure): the built-in provider's states and rows of the scopes it
        names (:func:`~streams.erasure.rules.held.held_scopes`; other scopes stay
        held), and the memos keyed by text, which belong to no tenant and refill
        without a database read: token counts, normalised texts, the local
        embedder's vectors of texts."""
        built = self.__dict__
        self.tokens.clear()
        normalize.cache_clear()
        if isinstance(embedder := built.get("embedder"), LocalEmbedder):
            embedder.clear_cache()
        what = held_scopes(erased) if erased is not None else None
        for provider in self._builtin_providers():
            if what is None:
                provider.drop_caches()
            else:
                provider.drop_scopes(what)
        if what is None:
            log.info("in-process caches dropped after an erasure")
        else:
            log.info("in-process caches of erasure %s (tenant %r) dropped",
                     erased.erasure_id if erased else "", what.tenant_id)

    def _held_reads(self) -> HeldReads | None:
        """The built-in provider's connection kept for searches, on an engine of its
        own (MySQL; none on SQLite)."""
        from streams.memory.providers.builtin.held_reads import HeldReads

        if is_sqlite(self.engine):
            return None
        if self._held_engine is None:
            self._held_engine = create_engine(self.settings.database, pooled=False)
            telemetry.instrument_engine(self._held_engine)
        return HeldReads(self._held_engine)

    def _builtin_providers(self) -> list[BuiltinProvider]:
        """The built-in providers built so far (none before the first use)."""
        from streams.memory.providers.builtin.provider import BuiltinProvider

        if "providers" not in self.__dict__:
            return []
        handles = [self.providers.get(route) for route in self.providers.configured()]
        return [h.provider for h in handles if isinstance(h.provider, BuiltinProvider)]

    @cached_property
    def sensitive(self) -> SensitiveScanner | None:
        """The process's sensitive-content scanner, built on first use (its libraries
        take about a second to import; the NER model loads only when the settings ask
        for names or places); None when screening is off."""
        s = self.settings.sensitive
        if not s.enabled:
            return None
        from streams.adapters.sensitive.scanner import SensitiveScanner as Scanner
        return Scanner(names=s.finds_names())

    @cached_property
    def sensitive_counts(self) -> SensitiveCounts:
        """The process's counts of sensitive content per tenant, kind and action:
        what its screening did, for ``/stats/sensitive``."""
        return SensitiveCounts()

    @cached_property
    def model_meter(self) -> ModelMeter:
        """The process's model usage: metrics, budgets and ``/stats/model-usage``."""
        return model_meter(self.settings)

    @cached_property
    def models(self) -> ModelFactory:
        """Chat models on the configured endpoint; none when no base URL is set."""
        llm = self.settings.llm
        if not llm.base_url:
            return ModelFactory(None, None)
        base_url = llm.base_url
        retry = RetryPolicy(attempts=llm.attempts, initial_s=0.5, max_s=5.0)

        def build(name: str) -> ChatModel:
            return ChatModel(self.http, base_url, name, api_key=_secret(llm.api_key),
                             timeout_s=llm.timeout_s, retry=retry, meter=self.model_meter)

        return ModelFactory(build, llm.model, use_agent_model=llm.use_agent_model)


def model_meter(settings: Settings) -> ModelMeter:
    """The model meter the ``model_usage`` settings describe."""
    u = settings.model_usage
    return ModelMeter(
        labels=LabelPolicy.of(u.labelled_tenants, u.labelled_agents),
        prices={m: Price(p.input_per_1k, p.output_per_1k) for m, p in u.prices.items()},
        daily_tokens=u.daily_tokens, tenant_daily_tokens=u.tenant_daily_tokens,
        book=UsageBook(max_tenants=u.max_tenants, keep_hours=u.keep_hours),
        models=[m for m in (settings.llm.model, settings.embedding.model) if m])


def _secret(value: SecretStr | None) -> str | None:
    return value.get_secret_value() if value is not None else None
