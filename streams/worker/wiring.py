"""Wiring: the composition root. Every processor of every stage is built here,
from parts, and nowhere else: the worker (``streams/worker/context.py``), the
agent tests and the benchmarks all call this builder, the worker with its
started :class:`~streams.worker.runtime.Runtime`, the tests with fakes.

It turns the stages' settings into the plain values each part receives; the
stages themselves never read settings (the runtime turns the resource
settings into resources, :mod:`streams.worker.runtime`).
"""

from __future__ import annotations

import os
import random
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.answered_store import AnsweredStore
from streams.adapters.db.builtin_erasure import BuiltinCopies
from streams.adapters.db.cube_lock import NamedCubeLocks
from streams.adapters.db.engine import is_sqlite
from streams.adapters.db.episode_rows import EpisodeRows
from streams.adapters.db.erasure_deletes import TableDeletes
from streams.adapters.db.erasure_origins import OriginRows
from streams.adapters.db.erasure_reads import ConversationReads
from streams.adapters.db.errors import is_transient
from streams.adapters.db.expiries import ExpiryStore
from streams.adapters.db.isolation import IsolatedBatches
from streams.adapters.db.ledger import LedgerStore
from streams.adapters.db.messages import MessageStore
from streams.adapters.db.reprocess_claims import ReprocessClaims
from streams.adapters.db.reprocess_store import ReprocessStore
from streams.adapters.db.runs import RunStore
from streams.adapters.db.summaries import SummaryRows
from streams.adapters.db.unavailable import UnavailableCubeLocks
from streams.adapters.kafka.clients import kafka_security
from streams.adapters.kafka.partitioning import home_partitions
from streams.adapters.kafka.query_consumer_config import QueryConsumerConfig
from streams.adapters.kafka.replies import ReplyPublisher
from streams.adapters.kafka.reply_lookup import ReplyLookup
from streams.adapters.redis.answered_record import RedisAnsweredRecord
from streams.adapters.redis.conversation_cache import ConversationCache
from streams.adapters.sensitive.window_screening import WindowScreening
from streams.clock import naive_utc
from streams.consolidation.cube_quota import CubeQuota
from streams.consolidation.episode_retention import EpisodeRetention
from streams.consolidation.expiry import ExpirySweeper
from streams.consolidation.failures import FailureRouter
from streams.consolidation.judge import ConflictDecider, MemoryJudge
from streams.consolidation.pipeline import ConsolidationPipeline, PassageCut, PipelineConfig
from streams.consolidation.ports import Ledger, Runs, SensitiveDetector
from streams.consolidation.processor import ConsolidationProcessor
from streams.consolidation.reprocess import Reprocessor
from streams.consolidation.retry_scheduler import RetryScheduler
from streams.consolidation.screening import Screening
from streams.consolidation.sensitive_counts import SensitiveCounts
from streams.consolidation.slots import SlotFreeLocks
from streams.consolidation.summarizer import Summarizer
from streams.consolidation.writer import HiddenMemories, MemoryWriter
from streams.erasure.executor import ErasureConfig, ErasureExecutor
from streams.erasure.processor import ErasureProcessor
from streams.erasure.registry import ErasureRegistry
from streams.erasure.retention import RetentionConfig, RetentionRunner
from streams.ingest.model import IngestConfig
from streams.ingest.pacing import EventPacer
from streams.ingest.processor import IngestProcessor
from streams.memory.agent_configs import AgentConfigs
from streams.memory.cube_locks import CubeLocks
from streams.memory.providers.builtin.provider import BuiltinProvider
from streams.memory.registry import ModelFactory, ProviderRegistry
from streams.model_usage.meter import ModelMeter
from streams.model_usage.rules import LabelPolicy
from streams.query.answered import AnsweredRequests
from streams.query.answering import QueryAnswering
from streams.query.engine import QueryConfig, QueryEngine, SearchRecorder
from streams.query.ports import MaybeSeen, ReplySink, SentReplies
from streams.query.processor import QueryProcessor
from streams.query.rules.reply_targets import ReplyTargets
from streams.quotas.book import QuotaBook
from streams.session.idle import IdleScanner, WatchedSessions
from streams.session.ports import SessionTable
from streams.session.reader import SessionReader
from streams.session.stale import StaleHistories
from streams.settings import Settings
from streams.tokens import TokenCounter
from streams.wire.envelope import Publisher
from streams.wire.erasure import ErasureFence
from streams.wire.signing import Signing
from streams.worker.foreground import Foreground
from streams.worker.quotas import Quotas, delays_events, process_quotas


class Parts(Protocol):
    """What the processors are built from: the runtime's resources and stores
    (:class:`~streams.worker.runtime.Runtime`), or fakes of them in tests."""

    @property
    def engine(self) -> AsyncEngine: ...

    @property
    def redis(self) -> Redis | None: ...

    @property
    def store(self) -> MessageStore: ...

    @property
    def cache(self) -> ConversationCache: ...

    @property
    def stale(self) -> StaleHistories: ...

    @property
    def reader(self) -> SessionReader: ...

    @property
    def tokens(self) -> TokenCounter: ...

    @property
    def providers(self) -> ProviderRegistry: ...

    @property
    def models(self) -> ModelFactory: ...

    @property
    def model_meter(self) -> ModelMeter | None: ...

    @property
    def sensitive(self) -> SensitiveDetector | None:
        """The process's sensitive-content detector (None: nothing is screened)."""
        ...

    @property
    def sensitive_counts(self) -> SensitiveCounts | None:
        """The process's counts of sensitive content per tenant, kind and action, for
        ``/stats/sensitive`` (None: only the metric counts)."""
        ...


@dataclass
class Consolidation:
    """The consolidation stage of one worker: its pipeline and processor, and
    the upkeep of what it keeps (expiries to retry, ledgers to purge)."""

    pipeline: ConsolidationPipeline
    processor: ConsolidationProcessor
    sweeper: ExpirySweeper
    ledger: Ledger
    runs: Runs
    clock: Callable[[], float] = time.time

    async def purge(self, retention_days: float) -> tuple[int, int]:
        """Drop ledger rows, finished runs and stale judged runs older than the retention."""
        now = naive_utc(datetime.fromtimestamp(self.clock(), UTC))
        cutoff = now - timedelta(days=retention_days)
        return await self.ledger.purge(cutoff), await self.runs.purge(cutoff)


class Wiring:
    """Builds each stage's processor from ``parts`` and ``settings``.

    ``clock`` (seconds since the epoch) and ``rng`` (uniform in [0, 1)) reach
    every part built here that reads the wall clock or draws a jitter, so a test
    can drive them (the database retries of the stores wait on their own).
    ``erasures``: the process's erasure registry; without it nothing is skipped.
    ``quotas``: the process's quotas per tenant (by default its own, from the
    settings); ``query_quotas`` replaces its quota of queries. ``foreground``: the
    process's queries, which consolidation waits for at its checkpoints (none: no wait).
    """

    def __init__(self, settings: Settings, parts: Parts, *, publisher: Publisher,
                 agent_configs: AgentConfigs, sessions: SessionTable | None = None,
                 clock: Callable[[], float] = time.time,
                 rng: Callable[[], float] = random.random,
                 erasures: ErasureRegistry | None = None,
                 query_quotas: QuotaBook | None = None, quotas: Quotas | None = None,
                 foreground: Foreground | None = None) -> None:
        self.settings = settings
        self.foreground = foreground
        self.quotas = quotas if quotas is not None else process_quotas(settings)
        if query_quotas is not None:
            self.quotas.queries = query_quotas
        self.parts = parts
        self.publisher = publisher
        self.agent_configs = agent_configs
        self.sessions = sessions
        self.clock = clock
        self.rng = rng
        self.erasures = erasures
        self._cube_locks: CubeLocks | None = None
        self._replies: ReplyPublisher | None = None
        self._idle: IdleScanner | None = None

    # ① ingest (and ② the session state it keeps)
    def ingest_config(self) -> IngestConfig:
        k, i, c = self.settings.kafka, self.settings.ingest, self.settings.consolidation
        return IngestConfig(
            chat_topic=k.chat_topic, subagent_topic=k.subagent_topic, dlq_topic=k.dlq_topic,
            session_closed_topic=k.session_closed_topic, max_content_bytes=i.max_content_bytes,
            retry_initial_s=i.retry_initial_s, retry_max_s=i.retry_max_s,
            idle_topic=k.idle_topic, idle_timeout_s=c.idle_timeout_s,
            closed_retention_s=c.closed_session_retention_s,
            session_grace_s=c.session_grace_s, max_future_s=i.max_future_s,
            session_max_messages=c.session_max_messages,
            session_max_bytes=c.session_max_bytes)

    def ingest(self) -> IngestProcessor:
        if self.sessions is None:
            raise ValueError("the ingest processor needs the sessions table")
        e, store = self.erasures, self.parts.store
        return IngestProcessor(
            self.ingest_config(), store,
            IsolatedBatches(store, backoff_s=self.settings.ingest.retry_initial_s),
            self.parts.cache, self.publisher, WatchedSessions(self.sessions, self.idle_scanner()),
            self.clock, stale=self.parts.stale,
            state_flush_interval_s=self.settings.ingest.state_flush_interval_s,
            home=home_partitions(self.settings.kafka.partitions),
            erasures=e.index if e else None, fence_passed=self._fence_passed if e else None,
            whole=ConversationReads(self.parts.engine), quota=self.event_pacer(),
            erased_events=store)

    def event_pacer(self) -> EventPacer[Any] | None:
        """A new pacer of chat events for each ingest processor (what it holds belongs
        to one run of the ingest agent); None when no tenant has a quota of events."""
        book, q = self.quotas.events, self.settings.quotas
        if book is None:
            return None
        return EventPacer(book, delays=delays_events(book),
                          chat_topic=self.settings.kafka.chat_topic,
                          max_wait_s=q.events_held_max_s, max_held=q.events_held_max,
                          max_tenant_bytes=q.events_held_tenant_bytes,
                          max_bytes=q.events_held_bytes)

    async def _fence_passed(self, fence: ErasureFence, tombstones: int) -> None:
        assert self.erasures is not None
        await self.erasures.log.pass_fence(fence.seq, fence.partition, tombstones,
                                           datetime.fromtimestamp(self.clock(), UTC),
                                           fence.round)

    def idle_scanner(self) -> IdleScanner:
        """The scanner of idle sessions, one per wiring: the ingest processors' writes
        of the sessions table keep it current."""
        if self._idle is None:
            c = self.settings.consolidation
            self._idle = IdleScanner(timeout_s=c.idle_timeout_s,
                                     resend_after_s=max(5 * c.idle_scan_interval_s, 60.0),
                                     retention_s=c.closed_session_retention_s,
                                     clock=self.clock)
        return self._idle

    # ③ consolidation into ④ long-term memory
    def cube_locks(self) -> CubeLocks:
        """The locks of memory cubes, one set per process: consolidation writes and
        erasures hold them (on MySQL, named locks shared by every worker)."""
        if self._cube_locks is None:
            engine = self.parts.engine
            self._cube_locks = NamedCubeLocks(
                timeout_s=self.settings.consolidation.cube_lock_timeout_s,
                engine=None if is_sqlite(engine) else engine)
        return self._cube_locks

    def _pipeline(self, ledger: Ledger, runs: Runs, *, summarize: bool = True,
                  hidden: HiddenMemories | None = None) -> ConsolidationPipeline:
        s, p = self.settings, self.parts
        c, llm = s.consolidation, s.llm
        engine = p.engine
        expiries = ExpiryStore(engine)
        writer = MemoryWriter(
            runs, expiries, ConflictDecider(duplicate_threshold=c.conflict_duplicate_threshold),
            SlotFreeLocks(self.cube_locks(), waits=c.concurrency, share=c.tenant_share),
            top_k=c.conflict_top_k, relativity=c.conflict_relativity,
            expiry_retry_s=c.expiry_sweep_interval_s, clock=self.clock, hidden=hidden,
            write_chunk=c.write_chunk)
        summarizer = Summarizer(SummaryRows(engine), p.cache, p.tokens,
                                threshold=c.summary_threshold,
                                budget_tokens=c.summary_token_budget,
                                max_messages=c.summary_max_messages, clock=self.clock)
        judge = MemoryJudge(count_tokens=p.tokens, max_items=llm.judge_max_items,
                            max_input_tokens=llm.judge_max_input_tokens)
        limit = min(c.passage_max_chars, c.episode_max_chars)
        return ConsolidationPipeline(
            ledger, runs, judge, writer, summarizer, p.providers, p.models,
            self.agent_configs, PipelineConfig(
                default_long_memory=c.default_long_memory, max_messages=c.max_messages,
                max_bytes=c.max_bytes,
                close_slack_s=c.close_slack_s, context_messages=llm.judge_context_messages,
                dedup_jaccard=c.dedup_jaccard, dedup_levenshtein=c.dedup_levenshtein,
                dedup_short_len=c.dedup_short_len, episode_max_chars=c.episode_max_chars,
                passages=PassageCut(min(c.passage_target_chars, limit), limit,
                                    c.passages_per_message),
                late_window_days=c.ledger_retention_days, summarize=summarize),
            clock=self.clock, erasures=self.erasures.index if self.erasures else None,
            refresh_erasures=self.erasures.refresh if self.erasures else None,
            turn=self.foreground.turn if self.foreground else None,
            cube_quota=CubeQuota(EpisodeRows(engine), self.quotas.cube_memories),
            budget=p.model_meter, screening=self.screening())

    def screening(self) -> Screening | None:
        """Screening of what consolidation stores, with the process's detector and the
        deployment's policy; None when screening is off or there is no detector."""
        s = self.settings
        if not s.sensitive.enabled or self.parts.sensitive is None:
            return None
        labels = LabelPolicy.of(s.model_usage.labelled_tenants, ())
        return Screening(self.parts.sensitive, s.sensitive.actions(),
                         tenants=s.sensitive.tenants,
                         agents_may_relax=s.sensitive.agents_may_relax,
                         tenant_label=labels.tenant, counts=self.parts.sensitive_counts)

    def consolidation(self) -> Consolidation:
        s, p = self.settings, self.parts
        c, k = s.consolidation, s.kafka
        ledger, runs = LedgerStore(p.engine), RunStore(p.engine)
        pipeline = self._pipeline(ledger, runs)
        expiries = pipeline.writer.expiries
        router = FailureRouter(
            source_topic=k.session_closed_topic, retry_topic=k.retry_topic,
            dlq_topic=k.dlq_topic, max_attempts=c.retry_attempts,
            initial_s=c.retry_backoff_initial_s, max_s=c.retry_backoff_max_s,
            is_transient=is_transient, clock=self.clock, rng=self.rng)
        processor = ConsolidationProcessor(
            pipeline, router, self.publisher, concurrency=c.concurrency,
            tenant_share=c.tenant_share,
            tenant_shares=self.quotas.sessions_consolidating.overrides,
            share_quota=self.quotas.sessions_consolidating,
            infra_initial_s=s.ingest.retry_initial_s, infra_max_s=s.ingest.retry_max_s,
            rand=self.rng)
        sweeper = ExpirySweeper(expiries, p.providers, initial_s=c.expiry_sweep_interval_s,
                                max_s=max(c.expiry_sweep_interval_s, 3600.0), clock=self.clock)
        return Consolidation(pipeline, processor, sweeper, ledger, runs, self.clock)

    def reprocessor(self) -> Reprocessor:
        """``memstream reprocess``: sessions rebuilt by a pipeline of their own (the
        job's messages, the replaced memories hidden from its conflict checks, no
        summaries)."""
        engine = self.parts.engine
        store = ReprocessStore(engine)
        pipeline = self._pipeline(ReprocessClaims(engine), RunStore(engine), summarize=False,
                                  hidden=lambda run, cube, user: store.hidden(
                                      run.closed_id, cube, user))
        job_locks = NamedCubeLocks(timeout_s=2.0, engine=None if is_sqlite(engine) else engine)
        return Reprocessor(store, pipeline, job_locks,
                           gap_s=self.settings.consolidation.idle_timeout_s, clock=self.clock)

    def retry_scheduler(self, consolidation: Consolidation,
                        should_release: Callable[[], bool]) -> RetryScheduler:
        s = self.settings
        return RetryScheduler(consolidation.processor, should_release=should_release,
                              max_held=s.consolidation.retry_max_held, clock=self.clock)

    # ⑥ erasure and retention
    def _builtin(self) -> BuiltinProvider:
        provider = self.parts.providers.get("mysql").provider
        assert isinstance(provider, BuiltinProvider)
        return provider

    def erasure_processor(self, chat_offsets: Callable[[], Awaitable[dict[int, int]]],
                          partitions: int, *,
                          should_release: Callable[[], bool] = lambda: False,
                          ) -> ErasureProcessor:
        """Erasure requests; ``chat_offsets``: the chat topic's end offsets now,
        ``partitions``: those of the ingest stage's topics (each gets a fence);
        ``should_release``: a rebalance or a shutdown began (the erasure in progress lets
        the queue go, its request requeued). A turn is at most half the stall timeout
        of the liveness check, so a long erasure commits its queue's offsets in time."""
        if self.erasures is None:
            raise ValueError("the erasure processor needs the erasure registry")
        s, p = self.settings, self.parts
        engine = p.engine
        executor = ErasureExecutor(
            ErasureConfig(idle_topic=s.kafka.idle_topic, partitions=partitions,
                          retry_initial_s=s.ingest.retry_initial_s,
                          retry_max_s=s.ingest.retry_max_s,
                          turn_s=min(s.erasure.turn_s, s.health.stall_timeout_s / 2),
                          home=home_partitions(s.kafka.partitions)),
            self.erasures.log, TableDeletes(engine, chunk=s.erasure.chunk_rows),
            OriginRows(engine), BuiltinCopies(self._builtin()), p.providers, p.cache,
            self.publisher, self.erasures, UnavailableCubeLocks(self.cube_locks()),
            chat_offsets=chat_offsets, clock=self.clock, should_release=should_release)
        return ErasureProcessor(executor, s.kafka.dlq_topic, reply_targets=self.reply_targets(),
                                signing=self.signing(), clock=self.clock,
                                retry_initial_s=s.ingest.retry_initial_s,
                                retry_max_s=s.ingest.retry_max_s, quotas=self.quotas.erasures)

    def episode_retention(self) -> EpisodeRetention:
        """Episodes beyond their tenant's limits expired (the built-in provider's)."""
        c = self.settings.consolidation
        return EpisodeRetention(EpisodeRows(self.parts.engine), self.parts.providers,
                                self.quotas.retention, chunk=c.episode_retention_chunk,
                                clock=self.clock)

    def retention(self) -> RetentionRunner:
        e = self.settings.erasure
        return RetentionRunner(
            RetentionConfig(e.message_retention_days, e.summary_retention_days),
            TableDeletes(self.parts.engine, chunk=e.chunk_rows), self.parts.cache, self.clock)

    # ⑤ query
    def query_processor(self, search_log: SearchRecorder | None = None) -> QueryProcessor:
        s, p = self.settings, self.parts
        q = s.query
        engine = QueryEngine(
            QueryConfig(
                candidate_pool=q.candidate_pool, relativity=q.relativity,
                min_score=q.min_score, max_memory_chars=q.max_memory_chars,
                user_share=q.user_share, pref_top_k=q.pref_top_k, outline_chars=q.outline_chars,
                default_long_memory=s.consolidation.default_long_memory,
                date_lift=s.ranking.date_lift,
                date_lift_slack_days=s.ranking.date_lift_slack_days),
            p.reader, self.agent_configs, p.providers, p.tokens, search_log=search_log,
            window_screen=self.window_screening())
        return QueryProcessor(engine, s.kafka.dlq_topic, clock=self.clock,
                              reply_targets=self.reply_targets(), signing=self.signing(),
                              quotas=self.quotas.queries, load=self.quotas.load)

    def window_screening(self) -> WindowScreening | None:
        """The Session window's screening, when the deployment asks for it."""
        screening = self.screening()
        if screening is None or not self.settings.sensitive.session_window:
            return None
        return WindowScreening(screening, self.agent_configs)

    def reply_targets(self) -> ReplyTargets:
        """Where replies and receipts may go: never to memstream's own topics."""
        s = self.settings
        own = [getattr(s.kafka, name) for name in type(s.kafka).model_fields
               if name.endswith("_topic")]
        return ReplyTargets.of([*s.query.reply_topics, s.query.reply_topic], own,
                               s.kafka.app_id)

    def signing(self) -> Signing | None:
        """The tenants' keys when queries and erasures must be signed."""
        q = self.settings.query
        if not q.require_signature:
            return None
        return Signing({t: k.get_secret_value() for t, k in q.tenant_keys.items()},
                       q.signature_max_age_s)

    def replies(self) -> ReplyPublisher:
        """The producer of query replies and erasure receipts, one per wiring: it
        starts with its first send (or :meth:`ReplyPublisher.start`); its owner stops it."""
        if self._replies is None:
            s = self.settings
            self._replies = ReplyPublisher(
                s.kafka.broker, every_partition=s.query.unaddressed_replies == "all_partitions",
                send_timeout_s=s.query.reply_send_timeout_s, security=kafka_security(s.kafka))
        return self._replies

    def query_answering(self, search_log: SearchRecorder | None = None, *,
                        sent_replies: SentReplies,
                        maybe_seen: MaybeSeen | None = None,
                        replies: ReplySink | None = None,
                        ) -> QueryAnswering:
        """One request to its reply; replies go out through ``replies`` (by default
        :meth:`replies`), dead letters through the worker's publisher. ``maybe_seen``:
        the query consumer's word on which requests may have been delivered before
        (all, when not given); ``sent_replies``: looks a reply up in its reply topic
        (:meth:`reply_lookup`, closed by its owner)."""
        s, p = self.settings, self.parts
        quick = None if p.redis is None else RedisAnsweredRecord(p.redis,
                                                                 prefix=s.redis.key_prefix)
        answered = AnsweredRequests(quick, retry_after_s=s.redis.retry_after_s,
                                    durable=AnsweredStore(p.engine), wall_clock=self.clock)
        return QueryAnswering(
            self.query_processor(search_log), replies or self.replies(), self.publisher,
            answered, retry_initial_s=s.ingest.retry_initial_s,
            retry_max_s=s.ingest.retry_max_s, maybe_seen=maybe_seen or (lambda rec: True),
            sent_replies=sent_replies)

    def reply_lookup(self) -> ReplyLookup:
        """A lookup of replies in their reply topics, with clients of its own kept
        between lookups: its owner closes it."""
        s = self.settings
        return ReplyLookup(s.kafka,
                           every_partition=s.query.unaddressed_replies == "all_partitions")


def query_consumer_config(s: Settings) -> QueryConsumerConfig:
    """The query consumer: ``memory.queries`` in a consumer group of its own."""
    q = s.query
    group = q.group_id or f"{s.kafka.app_id}-query"
    return QueryConsumerConfig(
        broker=s.kafka.broker, topic=s.kafka.queries_topic, group_id=group,
        client_id=f"{group}.{q.instance_id or socket.gethostname()}.{os.getpid()}",
        session_timeout_s=q.session_timeout_s, heartbeat_interval_s=q.heartbeat_interval_s,
        instance_id=q.instance_id, concurrency=q.concurrency, read_ahead=q.read_ahead,
        read_ahead_bytes=q.read_ahead_bytes, drain_timeout_s=q.drain_timeout_s,
        contended_slots=q.contended_slots, security=kafka_security(s.kafka),
    )

