"""Assembling the consolidation parts from the settings (the only place that
reads them); everything it builds receives plain values."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from streams.adapters.db.cube_lock import CubeLocks
from streams.adapters.db.engine import is_sqlite
from streams.adapters.db.ledger import LedgerStore
from streams.adapters.db.runs import RunStore
from streams.adapters.kafka.publish import Publisher
from streams.consolidation.expiry import ExpiryStore, ExpirySweeper
from streams.consolidation.failures import RetryRouter
from streams.consolidation.judge import ConflictDecider, MemoryJudge
from streams.consolidation.pipeline import ConsolidationPipeline, PipelineConfig
from streams.consolidation.processor import ConsolidationProcessor
from streams.consolidation.retry_scheduler import RetryScheduler
from streams.consolidation.summarizer import Summarizer
from streams.consolidation.writer import MemoryWriter
from streams.memory.agent_configs import AgentConfigs
from streams.worker.runtime import Runtime


@dataclass
class Consolidation:
    pipeline: ConsolidationPipeline
    processor: ConsolidationProcessor
    sweeper: ExpirySweeper
    ledger: LedgerStore
    runs: RunStore

    async def purge(self, retention_days: float) -> tuple[int, int]:
        """Drop ledger rows and finished runs older than the retention."""
        cutoff = (datetime.now(UTC) - timedelta(days=retention_days)).replace(tzinfo=None)
        return await self.ledger.purge(cutoff), await self.runs.purge(cutoff)


def build_consolidation(runtime: Runtime, configs: AgentConfigs,
                        publisher: Publisher) -> Consolidation:
    """The pipeline and its processor on a started ``runtime``."""
    s = runtime.settings
    c, llm, k = s.consolidation, s.llm, s.kafka
    engine = runtime.engine
    ledger, runs = LedgerStore(engine), RunStore(engine)
    expiries = ExpiryStore(engine, runs)
    writer = MemoryWriter(
        runs, expiries, ConflictDecider(duplicate_threshold=c.conflict_duplicate_threshold),
        CubeLocks(timeout_s=c.cube_lock_timeout_s, engine=None if is_sqlite(engine) else engine),
        top_k=c.conflict_top_k, relativity=c.conflict_relativity,
        expiry_retry_s=c.expiry_sweep_interval_s)
    summarizer = Summarizer(engine, runtime.cache, runtime.tokens, threshold=c.summary_threshold,
                            budget_tokens=c.summary_token_budget,
                            max_messages=c.summary_max_messages)
    judge = MemoryJudge(count_tokens=runtime.tokens, max_items=llm.judge_max_items,
                        max_input_tokens=llm.judge_max_input_tokens)
    pipeline = ConsolidationPipeline(
        engine, ledger, runs, judge, writer, summarizer, runtime.providers, runtime.models,
        configs, PipelineConfig(
            default_long_memory=c.default_long_memory, max_messages=c.max_messages,
            close_slack_s=c.close_slack_s, context_messages=llm.judge_context_messages,
            dedup_jaccard=c.dedup_jaccard, dedup_levenshtein=c.dedup_levenshtein,
            dedup_short_len=c.dedup_short_len, episode_max_chars=c.episode_max_chars,
            late_window_days=c.ledger_retention_days))
    router = RetryRouter(
        source_topic=k.session_closed_topic, retry_topic=k.retry_topic, dlq_topic=k.dlq_topic,
        max_attempts=c.retry_attempts, initial_s=c.retry_backoff_initial_s,
        max_s=c.retry_backoff_max_s)
    processor = ConsolidationProcessor(
        pipeline, router, publisher, concurrency=c.concurrency,
        infra_initial_s=s.ingest.retry_initial_s, infra_max_s=s.ingest.retry_max_s)
    sweeper = ExpirySweeper(expiries, runtime.providers, initial_s=c.expiry_sweep_interval_s,
                            max_s=max(c.expiry_sweep_interval_s, 3600.0))
    return Consolidation(pipeline, processor, sweeper, ledger, runs)


def build_retry_scheduler(runtime: Runtime, consolidation: Consolidation,
                          publisher: Publisher,
                          should_release: Callable[[], bool]) -> RetryScheduler:
    s = runtime.settings
    return RetryScheduler(consolidation.processor, publisher, retry_topic=s.kafka.retry_topic,
                          should_release=should_release,
                          max_held=s.consolidation.retry_max_held)
