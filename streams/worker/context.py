"""The worker process: what its agents share, built by the composition root
(:mod:`streams.worker.wiring`) and closed in one place.

``worker`` is the one instance; of the library's stages, the agents in
``agents/`` reach only it (an import contract keeps it so). The runtime, the
consolidation (shared by two agents), the idle scanner and the query path are
built once per process; an agent's own processor (ingest, retry scheduler) is
built anew each time the agent starts. The resources (database engine, Redis,
the HTTP client, the reply producer, the search log, the query consumer) are
opened when the first agent needs them and closed, in order, when the app
shuts down.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from streams.adapters.db.answered_store import AnsweredStore
from streams.adapters.db.dead_letter_ledger import DeadLetterLedger
from streams.adapters.kafka.clients import end_offsets_or_unavailable, partitions
from streams.adapters.kafka.dead_letters import DeadLetterFinder, ExactlyOnceDeadLetters
from streams.adapters.kafka.publish import ProducerPublisher
from streams.adapters.kafka.query_consumer import QueryConsumer
from streams.adapters.kafka.query_standby import QueryStandby
from streams.adapters.kafka.replies import ReplyPublisher
from streams.adapters.kafka.reply_lookup import ReplyLookup
from streams.backoff import retry_forever
from streams.consolidation.episode_retention import EpisodeRetention
from streams.consolidation.retry_scheduler import RetryScheduler
from streams.erasure.processor import REQUEUED, ErasureProcessor
from streams.erasure.retention import RetentionRunner
from streams.ingest.pacing import EventPacer
from streams.ingest.processor import IngestProcessor
from streams.memory.agent_configs import TableAgentConfigs
from streams.query.answered import ANSWERED_TTL_S
from streams.query.answering import QueryAnswering
from streams.query.rules.fair_dispatch import tenant_of
from streams.session.idle import IdleScanner, idle_check_record
from streams.settings import Settings
from streams.stats.search_log import SearchLog, SearchLogWriter
from streams.wire.envelope import DeadLettered, Handled, Outgoing, SourceRecord, ToSend
from streams.worker.app import app, settings
from streams.worker.commit_guard import CommitGuard
from streams.worker.faust_glue import (
    FaustTable,
    admit,
    committed_offsets,
    finish,
    hold,
    install_commit_guard,
    out_of_order_topics,
    resume_clears_only_a_suspended_flow,
    seek_uncommitted_to_start,
)
from streams.worker.faust_wait_empty import install_wait_empty
from streams.worker.foreground import Foreground
from streams.worker.loop_busy import LoopBusy
from streams.worker.query_process import rescuer
from streams.worker.query_supervisor import QuerySupervisor
from streams.worker.quotas import events_may_delay, process_quotas
from streams.worker.runtime import Runtime
from streams.worker.tables import agent_configs, sessions
from streams.worker.web import install as install_web
from streams.worker.wiring import Consolidation, Wiring, query_consumer_config

T = TypeVar("T")



def record_tenant(rec: SourceRecord) -> str:
    """The tenant a query record's key names (``tenant/user``)."""
    return tenant_of(rec.key)

class WorkerContext:
    def __init__(self, app: Any, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.commit_guard = CommitGuard()
        # the worker command migrated the schema, or checked it (--no-migrate),
        # before Faust started: this runtime never migrates
        self.runtime = Runtime(settings, migrate=False)
        # memory.queries has a consumer group of its own, outside Faust's (agents/query.py)
        # on this loop with ingest and consolidation, whose work fewer query slots do
        # not relieve: slots are not shared as contended here (the query process's are)
        self.queries = QueryConsumer(query_consumer_config(settings))
        self.loop_busy = LoopBusy(settings.query.contended_busy)  # measured for the gauge
        # ... and every worker reads all of it outside that group, for the requests
        # whose owner does not begin them in time (streams/query/rescue.py)
        self.standby = QueryStandby(query_consumer_config(settings), lambda: partitions(
            settings.kafka, settings.kafka.queries_topic))
        self._rescuing: asyncio.Task[None] | None = None
        self._built: dict[str, Any] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._publisher: ExactlyOnceDeadLetters | None = None
        self._replies: ReplyPublisher | None = None
        self._search_log: SearchLogWriter | None = None
        self._reply_lookup: ReplyLookup | None = None
        # one per process: the processors take from them, /stats/quotas reads them
        self.quotas = process_quotas(settings)
        # with query.process own: the query process beside this worker
        self.query_process = (QuerySupervisor(settings.query.drain_timeout_s + 10)
                              if settings.query.process == "own" else None)
        # the queries under way, which the background stages wait for at their checkpoints
        self.foreground = Foreground(settings.query.background_wait_s, load=self.quotas.load)

    def install(self) -> None:
        """What must be in place before Faust starts: the consumer fixes (its seek
        after a rebalance, its flow control's resume, its wait for the records handed
        out), the commit guard, the web pages and the shutdown hook (idempotent
        fixes)."""
        seek_uncommitted_to_start()
        resume_clears_only_a_suspended_flow()
        install_wait_empty()
        install_commit_guard(self.commit_guard,
                             out_of_order_topics=out_of_order_topics(self.settings.kafka),
                             recover_after_s=self.settings.kafka.redeliver_after_s)
        install_web(self.app, self.runtime, self.settings,
                    None if self.own_query_process else self.queries, self.quotas.views(),
                    query_process=self.query_process)
        self.app.on_before_shutdown.connect(self._on_shutdown)

    async def _on_shutdown(self, sender: Any, /, *args: Any, signal: Any, **kwargs: Any) -> None:
        await self.close()

    async def close(self) -> None:
        """Close everything, in order: the query consumer first (it drains and
        commits while replies and Redis still work), the runtime last."""
        await self.stop_query_process()
        await self.stop_rescue()
        await self.queries.stop()
        if self._replies is not None:
            await self._replies.stop()
        if self._reply_lookup is not None:
            await self._reply_lookup.close()
        if self._search_log is not None:
            await self._search_log.stop()
        await self.runtime.stop()

    async def _once(self, name: str, build: Callable[[], Awaitable[T]]) -> T:
        """``build()`` once per process (one lock per name, so a build may use
        another); a build that failed or was cancelled is tried again."""
        if name not in self._built:
            async with self._locks.setdefault(name, asyncio.Lock()):
                if name not in self._built:
                    self._built[name] = await build()
        return self._built[name]  # type: ignore[no-any-return]

    @property
    def publisher(self) -> ExactlyOnceDeadLetters:
        """The worker's publisher: through Faust's producer, dead letters exactly once."""
        if self._publisher is None:
            self._publisher = ExactlyOnceDeadLetters(
                ProducerPublisher(self.app.producer.send), dlq_topic=self.settings.kafka.dlq_topic,
                ledger=lambda: DeadLetterLedger(self.runtime.engine),
                finder=DeadLetterFinder(self.settings.kafka))
        return self._publisher

    async def wiring(self) -> Wiring:
        """The composition root over this worker's started runtime, with every erasure
        recorded so far taken in (nothing an erasure covers is stored again)."""
        async def build() -> Wiring:
            await self.runtime.start()
            i = self.settings.ingest
            await retry_forever(self.runtime.erasures.refresh, what="erasure-log",
                                initial_s=i.retry_initial_s, max_s=i.retry_max_s)
            return Wiring(self.settings, self.runtime, publisher=self.publisher,
                          agent_configs=TableAgentConfigs(agent_configs),
                          sessions=FaustTable(sessions), erasures=self.runtime.erasures,
                          quotas=self.quotas, foreground=self.foreground)
        return await self._once("wiring", build)

    async def ingest_processor(self) -> IngestProcessor:
        """A new processor for each start of the ingest agent (a restarted agent
        starts from the table and the stale marks, not from what its previous
        run had staged)."""
        wiring = await self.wiring()
        # A batch touches hundreds of conversations and writes each one's state
        # once; Faust's default (pause the stream above 100 pending changelog
        # records) would throttle every batch.
        buffer = self.app.producer.buffer
        buffer.max_messages = max(buffer.max_messages, 4 * self.settings.ingest.batch_size)
        i = self.settings.ingest
        if self.runtime.cache.enabled:  # marks a previous process left count from the start
            await retry_forever(self.runtime.stale.sync, what="stale-marks",
                                initial_s=i.retry_initial_s, max_s=i.retry_max_s)
        processor = wiring.ingest()
        # a state leaves the table only once its records are committed
        processor.planning.committed = committed_offsets(self.app)
        return processor

    @staticmethod
    def event_pacer(processor: IngestProcessor) -> EventPacer[Any] | None:
        """The processor's pacer of chat events, when some tenant's events over its quota
        are held back (else nothing is held, and nothing need be read before decoding)."""
        pacer = processor.quota
        if isinstance(pacer, EventPacer) and events_may_delay(pacer.quota):
            return pacer
        return None

    def held(self, event: Any, held: bool) -> None:
        """``event``'s record is held back on purpose (``held``), or no longer: the commit
        guard does not count it as passed over meanwhile."""
        hold(self.commit_guard, event, held)

    async def consolidation(self) -> Consolidation:
        """One pipeline and processor, shared by the session-closed and retry
        agents, so they share the per-conversation locks."""
        async def build() -> Consolidation:
            return (await self.wiring()).consolidation()
        return await self._once("consolidation", build)

    def rebalancing(self) -> bool:
        """A rebalance or shutdown is under way: held records must be let go."""
        return bool(self.app.rebalancing) or not self.app.flow_control.is_active()

    async def retry_scheduler(self) -> RetryScheduler:
        """A new scheduler for each start of the retry agent (the records it holds
        belong to that agent's stream), over the one consolidation."""
        return (await self.wiring()).retry_scheduler(await self.consolidation(),
                                                     self.rebalancing)

    async def idle_scanner(self) -> IdleScanner:
        async def build() -> IdleScanner:
            return (await self.wiring()).idle_scanner()
        return await self._once("idle-scanner", build)

    def rescan_idle(self) -> None:
        """This worker's part of the sessions table changed beneath the idle scanner
        (partitions assigned or revoked, the table recovered): its next scan reads the
        table whole."""
        scanner = self._built.get("idle-scanner")
        if isinstance(scanner, IdleScanner):
            scanner.rescan()

    async def idle_checks(self, scanner: IdleScanner) -> list[Outgoing]:
        """The idle checks due now for this worker's part of the sessions table (read in
        parts when the scanner must read it whole: the event loop is shared)."""
        topic = self.settings.kafka.idle_topic
        table = FaustTable(sessions)
        return [idle_check_record(topic, c)
                for c in await scanner.tick_in_parts(table.keys, table.get)]

    async def replies(self) -> ReplyPublisher:
        """The producer of query replies and erasure receipts (the wiring's), started."""
        async def build() -> ReplyPublisher:
            replies = (await self.wiring()).replies()
            await replies.start()
            self._replies = replies
            return replies
        return await self._once("replies", build)

    async def query_answering(self) -> QueryAnswering:
        """What the query consumer runs for each request, with one reply producer."""
        async def build() -> QueryAnswering:
            wiring = await self.wiring()
            replies = await self.replies()
            self._search_log = SearchLogWriter(SearchLog(self.runtime.engine))
            await self._search_log.start()
            self._reply_lookup = wiring.reply_lookup()
            return wiring.query_answering(self._search_log, maybe_seen=self.queries.maybe_seen,
                                          replies=replies, sent_replies=self._reply_lookup)
        return await self._once("query-answering", build)

    @property
    def own_query_process(self) -> bool:
        """Queries are answered by a process of their own beside this worker."""
        return self.settings.query.process == "own"

    async def start_query_process(self, wait_s: float) -> bool:
        """Start the query process (nothing if it runs); whether it had its partitions
        within ``wait_s`` (it keeps trying)."""
        assert self.query_process is not None, "query.process is not own"
        self.query_process.start()
        return await self.query_process.wait_ready(wait_s)

    async def stop_query_process(self) -> None:
        if self.query_process is not None:
            await self.query_process.stop()

    async def start_rescue(self) -> bool:
        """Start the standby reader and its rescuer (``query.rescue``, with Redis to
        decide who takes a request over); whether they run."""
        q = self.settings.query
        wiring = await self.wiring()
        if not q.rescue or wiring.parts.redis is None or self._rescuing is not None:
            return self._rescuing is not None
        answering = await self.query_answering()
        rescue = rescuer(self.settings, self.queries,
                         self.foreground.serve(answering.rescue, tenant=record_tenant))
        self._rescuing = asyncio.get_running_loop().create_task(rescue.run())
        self.standby.start(rescue.offer)
        return True

    async def stop_rescue(self) -> None:
        await self.standby.stop()
        if self._rescuing is not None:
            self._rescuing.cancel()
            await asyncio.gather(self._rescuing, return_exceptions=True)
            self._rescuing = None

    async def erasure_processor(self) -> ErasureProcessor:
        async def build() -> ErasureProcessor:
            k = self.settings.kafka
            count = len(await partitions(k, k.idle_topic)) or k.partitions
            return (await self.wiring()).erasure_processor(
                lambda: end_offsets_or_unavailable(k, k.chat_topic), count,
                should_release=self.rebalancing)
        return await self._once("erasure", build)

    async def deliver_erasure(self, handled: Handled) -> None:
        """The dead letter to the dead-letter topic, then the receipt to its caller; a
        request let go before its erasure finished, to the erasure topic again."""
        if isinstance(handled, ToSend) and handled.outcome == REQUEUED:
            await self.publisher.publish(handled.records)
            return
        receipts = handled.records if isinstance(handled, ToSend) else handled.replies
        if isinstance(handled, DeadLettered):
            await self.publisher.publish([handled.dead_letter])
        for receipt in receipts:
            await (await self.replies()).deliver(receipt)

    async def sync_erasures(self) -> None:
        await self.runtime.start()
        await self.runtime.erasures.refresh()

    async def episode_retention(self) -> EpisodeRetention:
        async def build() -> EpisodeRetention:
            return (await self.wiring()).episode_retention()
        return await self._once("episode_retention", build)

    async def retention(self) -> RetentionRunner:
        async def build() -> RetentionRunner:
            return (await self.wiring()).retention()
        return await self._once("retention", build)

    async def purge(self, retention_days: float) -> tuple[int, int, int]:
        """Ledger rows, finished runs and dead-letter records older than the
        retention (their counts), and answered requests older than any caller
        waits."""
        rows, runs = await (await self.consolidation()).purge(retention_days)
        now = datetime.now(UTC)
        letters = await DeadLetterLedger(self.runtime.engine).purge(
            now - timedelta(days=retention_days))
        await AnsweredStore(self.runtime.engine).purge(now - timedelta(seconds=ANSWERED_TTL_S))
        return rows, runs, letters

    async def sync_stale_marks(self) -> None:
        await self.runtime.start()
        await self.runtime.stale.sync()

    async def admitted(self, stream: Any, events: Iterable[Any]) -> list[Any]:
        """The events that reach memstream in order. One delivered after Faust passed
        over an earlier record of its partition is left alone: acknowledged to Faust
        only (the commit guard holds the commit at the record passed over, and the
        partition is delivered again from there), so no state moves past a record
        memstream has not seen."""
        kept = []
        for event in events:
            if admit(self.commit_guard, event):
                kept.append(event)
            else:
                await stream.ack(event)
        return kept

    async def let_go(self, stream: Any, events: Iterable[Any]) -> None:
        """Hand events back undone: acknowledged to Faust only (it waits for every
        record it handed out before a rebalance goes on), never finished, so the
        commit guard keeps each one's offset uncommitted and the partition's next
        owner reads the record again from the committed offset."""
        for event in events:
            await stream.ack(event)

    async def acknowledge(self, stream: Any, events: Iterable[Any]) -> None:
        """Acknowledge events whose records are stored or dead-lettered: the commit
        guard learns it first, then Faust."""
        for event in events:
            finish(self.commit_guard, event)
            await stream.ack(event)


worker = WorkerContext(app, settings)
# before the agents are declared and Faust starts: the one place the worker
# changes Faust's behaviour and adds its pages
worker.install()
