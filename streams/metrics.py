"""Prometheus metrics of every stage. Label sets are bounded: no user,
conversation or message ids ever become labels."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

LATENCY_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0
)
# the query objectives (p50 15 ms, p99 60 ms) are bucket bounds, so they are exact
QUERY_BUCKETS = (0.002, 0.005, 0.01, 0.015, 0.025, 0.04, 0.06, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
BATCH_BUCKETS = (1, 5, 10, 25, 50, 100, 250, 500, 1000, 2000, 5000)

# ----------------------------------------------------------------- ingest
INGEST_EVENTS = Counter(
    "memstream_ingest_events_total",
    "Chat events consumed, by source topic and outcome.",
    ["topic", "outcome"],
)
DEAD_LETTERS = Counter(
    "memstream_dead_letters_total",
    "Events sent to the dead-letter topic, by stage and reason.",
    ["stage", "reason"],
)
DEAD_LETTERS_DEDUPLICATED = Counter(
    "memstream_dead_letters_deduplicated_total",
    "Dead letters not published again: their record was delivered again after its "
    "dead letter had gone out.",
)
INGEST_BATCH = Histogram(
    "memstream_ingest_batch_size", "Events per ingest batch.", buckets=BATCH_BUCKETS
)
INGEST_HELD = Gauge(
    "memstream_ingest_events_held",
    "Chat events this worker holds back, of tenants over their quota of events "
    "(MEMSTREAM_QUOTAS__EVENTS_OVER_QUOTA=delay), to take in as the quota has room.",
)
SINK_LATENCY = Histogram(
    "memstream_sink_write_seconds",
    "Time to write one batch, by sink.",
    ["sink"],
    buckets=LATENCY_BUCKETS,
)
SINK_FAILURES = Counter(
    "memstream_sink_failures_total",
    "Failed batch writes, by sink and error class.",
    ["sink", "error"],
)
SINK_RETRIES = Counter(
    "memstream_sink_retries_total", "Batch writes retried after a failure, by sink.", ["sink"]
)
CACHE_READS = Counter(
    "memstream_cache_reads_total",
    "Session reads by cache result: hit, miss, stale (marked: read from the database), "
    "unchecked (a hit served without the stale-mark check, the database failing), error, "
    "disabled, bypass.",
    ["result"],
)
CACHE_BACKFILLS = Counter(
    "memstream_cache_backfills_total",
    "Conversation lists rebuilt from the database, by outcome.",
    ["outcome"],
)
CACHE_UNINDEXED_DROPS = Counter(
    "memstream_cache_unindexed_drops_total",
    "Conversation lists a write found without their event-id set (written by an older "
    "version, or half evicted) and dropped; the next read rebuilds them.",
)
CACHE_STALE_MARKS = Counter(
    "memstream_cache_stale_marks_total",
    "Stale-history marks (a Redis write failed after the database stored the batch): "
    "conversations marked, and marks cleared once their list was dropped or rebuilt.",
    ["event"],
)
CACHE_STALE = Gauge(
    "memstream_cache_stale_conversations",
    "Conversations this worker holds as stale: their lists are dropped, not appended to.",
)

# --------------------------------------------------------------- sessions
SESSIONS_OPEN = Gauge("memstream_sessions_open", "Open sessions in this worker's table partitions.")
SESSIONS_CLOSED = Counter(
    "memstream_sessions_closed_total", "Sessions closed, by trigger (explicit, idle).", ["trigger"]
)
SESSIONS_CUT = Counter(
    "memstream_sessions_cut_total",
    "Sessions closed at ingest because they reached the size bound "
    "(MEMSTREAM_CONSOLIDATION__SESSION_MAX_MESSAGES or __SESSION_MAX_BYTES), by tenant and "
    "bound (messages, bytes); the next message opens a new session.",
    ["tenant", "bound"],
)
SESSION_STATES_DROPPED = Counter(
    "memstream_session_states_dropped_total",
    "Conversation states dropped from the sessions table after the closed-session retention.",
)

# ---------------------------------------------------------- consolidation
CONSOLIDATIONS = Counter(
    "memstream_consolidations_total",
    "Session consolidations, by provider and outcome (done, retried, dead_lettered, skipped).",
    ["provider", "outcome"],
)
CONSOLIDATION_PARTS = Counter(
    "memstream_consolidation_parts_total",
    "Further parts of sessions longer than one run takes (MEMSTREAM_CONSOLIDATION__MAX_MESSAGES, "
    "__MAX_BYTES), sent on memory.session-closed when the part before was done, by tenant.",
    ["tenant"],
)
CONSOLIDATIONS_IN_FLIGHT = Gauge(
    "memstream_consolidations_in_flight",
    "Session ends this worker is consolidating right now (claimed, judged or writing).",
)
CONSOLIDATION_PENDING = Gauge(
    "memstream_consolidation_pending",
    "Session ends this worker has read and not yet acknowledged: consolidating, or waiting "
    "for an earlier session end of their conversation, a slot or a cube lock "
    "(MEMSTREAM_CONSOLIDATION__MAX_PENDING at most).",
)
CONSOLIDATION_LATENCY = Histogram(
    "memstream_consolidation_seconds", "Time to consolidate one session end, by provider.",
    ["provider"], buckets=LATENCY_BUCKETS,
)
CANDIDATES = Counter(
    "memstream_memory_candidates_total",
    "Memory candidates produced, by judge kind (model, rules).",
    ["judge"],
)
JUDGE_FALLBACKS = Counter(
    "memstream_judge_fallbacks_total",
    "Model judge answers replaced by the rule judge, by reason.",
    ["reason"],
)
DEDUP_DROPPED = Counter(
    "memstream_dedup_dropped_total",
    "Candidates dropped inside a batch, by rule (exact, containment, jaccard, levenshtein).",
    ["rule"],
)
CONFLICT_DECISIONS = Counter(
    "memstream_conflict_decisions_total",
    "Conflict decisions per candidate (store, skip, supersede), by decider (model, rules).",
    ["decision", "decider"],
)
MEMORIES_STORED = Counter(
    "memstream_memories_stored_total", "Long-term memories written, by provider and memory type.",
    ["provider", "type"],
)
MEMORIES_EXPIRED = Counter(
    "memstream_memories_expired_total",
    "Long-term memories expired (superseded), by provider.",
    ["provider"],
)
SUMMARIES = Counter(
    "memstream_summaries_total",
    "Conversation summaries generated, by generator (model, extractive).",
    ["generator"],
)

# ---------------------------------------------------- providers and model
PROVIDER_LATENCY = Histogram(
    "memstream_provider_request_seconds", "Provider call latency, by provider and operation.",
    ["provider", "operation"], buckets=LATENCY_BUCKETS,
)
PROVIDER_FAILURES = Counter(
    "memstream_provider_failures_total",
    "Failed provider calls, by provider, operation and error class.",
    ["provider", "operation", "error"],
)
PROVIDER_CALLS = Counter(
    "memstream_provider_requests_total", "Provider calls, by provider and operation.",
    ["provider", "operation"],
)
SCOPE_MEMORIES = Gauge(
    "memstream_scope_cache_memories",
    "Memories of the built-in provider's scopes this worker holds (indexed in memory).",
)
VECTOR_GRAPHS_BUILDING = Gauge(
    "memstream_vector_graphs_building",
    "Vector graphs of large scopes this worker is building (scanned exactly meanwhile).",
)
SENSITIVE_MEMORIES = Counter(
    "memstream_sensitive_memories_total",
    "Memories consolidation was about to store (facts, episodes, summaries) that held "
    "sensitive content, by tenant (`other` but for MEMSTREAM_MODEL_USAGE__LABELLED_TENANTS), "
    "kind (card, iban, email, phone, national_id, secret, ip, name, location) and the action "
    "taken (keep, mask, drop); a memory holding several kinds counts once for each.",
    ["tenant", "kind", "action"],
)
SENSITIVE_WINDOW_MESSAGES = Counter(
    "memstream_sensitive_window_messages_total",
    "Session-window messages a query was about to return that held sensitive content, when "
    "MEMSTREAM_SENSITIVE__SESSION_WINDOW is on, by tenant (as for "
    "memstream_sensitive_memories_total), kind and action (keep, mask, drop: left out); "
    "each message counts once per worker, when first screened.",
    ["tenant", "kind", "action"],
)
# model usage: tenant and agent are `other` but for the ones the settings name
# (MEMSTREAM_MODEL_USAGE__LABELLED_TENANTS, __LABELLED_AGENTS), streams/model_usage
MODEL_LABELS = ["tenant", "agent", "model", "purpose"]
MODEL_TOKENS = Counter(
    "memstream_model_tokens_total",
    "Model tokens, by tenant, agent, model, purpose (judge, conflict, summary, embed) and "
    "direction (in, out): the API's usage, counted with cl100k_base when it gives none.",
    [*MODEL_LABELS, "direction"],
)
MODEL_CALLS = Counter(
    "memstream_model_calls_total",
    "Model calls (each with its retries), by tenant, agent, model and purpose.", MODEL_LABELS,
)
MODEL_FAILURES = Counter(
    "memstream_model_failures_total",
    "Model calls that failed after their retries, by tenant, agent, model, purpose and error "
    "class.", [*MODEL_LABELS, "error"],
)
MODEL_RETRIES = Counter(
    "memstream_model_retries_total",
    "Model requests sent again after a retryable failure, by tenant, agent, model and purpose.",
    MODEL_LABELS,
)
MODEL_LATENCY = Histogram(
    "memstream_model_call_seconds",
    "Time of one model call, its retries included, by tenant, agent, model and purpose.",
    MODEL_LABELS, buckets=LATENCY_BUCKETS,
)
MODEL_COST = Counter(
    "memstream_model_cost_total",
    "Cost of model tokens by the price table (MEMSTREAM_MODEL_USAGE__PRICES), by tenant, agent, "
    "model and purpose, in the table's currency.", MODEL_LABELS,
)
MODEL_BUDGET_FALLBACKS = Counter(
    "memstream_model_budget_fallbacks_total",
    "Session ends consolidated without the model because their tenant had spent its daily "
    "token budget (MEMSTREAM_MODEL_USAGE__DAILY_TOKENS), by tenant.", ["tenant"],
)
MODEL_TOKENS_PER_MESSAGE = Histogram(
    "memstream_model_tokens_per_message",
    "Chat-model tokens (judge, conflict, summary) a session end took per message it "
    "consolidated, by tenant.", ["tenant"],
    buckets=(1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 10000),
)

# ----------------------------------------------------------------- process
GC_PAUSES = Histogram(
    "memstream_gc_pause_seconds",
    "Python garbage collections of the worker, by generation (2: a full collection, which "
    "walks the whole heap); nothing else runs during one.",
    ["generation"], buckets=QUERY_BUCKETS,
)

EVENT_LOOP_BUSY = Gauge(
    "memstream_event_loop_busy_share",
    "The share of its last measured window (about 0.3 s) this process's event loop spent "
    "running, not waiting for I/O (0 when the loop does not time its waits). In the query "
    "process, while it is at least query.contended_busy and another tenant asks, each "
    "tenant gets query.contended_slots.",
)

EVENT_LOOP_LAG = Histogram(
    "memstream_event_loop_lag_seconds",
    "How late the worker's event loop woke a 100 ms timer: time during which it ran "
    "something else (or the process had no CPU), so every query and record waited.",
    buckets=LATENCY_BUCKETS,
)

BACKGROUND_WAITED = Counter(
    "memstream_background_waited_seconds",
    "Time the background stages (ingest, consolidation) waited at their checkpoints "
    "for the worker's queries under way to finish, by stage.",
    ["stage"],
)

# ----------------------------------------------------------------- queries
QUERY_LATENCY = Histogram(
    "memstream_query_seconds", "End-to-end handling of one memory query.", buckets=QUERY_BUCKETS
)
QUERY_STAGE_LATENCY = Histogram(
    "memstream_query_stage_seconds", "Query time by stage (short_term, long_term, budget).",
    ["stage"], buckets=QUERY_BUCKETS,
)
QUERY_REPLIES = Counter(
    "memstream_query_replies_total", "Replies sent, by outcome (ok, partial, error).", ["outcome"]
)
QUERY_MEMORIES = Histogram(
    "memstream_query_memories",
    "Long-term memories returned per reply.",
    buckets=(0, 1, 2, 5, 10, 20, 50),
)
QUERY_EXPIRED = Counter(
    "memstream_query_expired_total",
    "Requests not answered because their caller had given up (older than their timeout_ms), "
    "by tenant (empty: a record older than any timeout, skipped unread).",
    ["tenant"],
)
QUERY_EXPIRED_AGE = Histogram(
    "memstream_query_expired_age_seconds",
    "How long each request not answered for its deadline had waited when a worker took it.",
    buckets=(0.3, 0.5, 1, 2, 5, 10, 30, 60, 300),
)
QUERY_DUPLICATES = Counter(
    "memstream_query_duplicates_total",
    "Redelivered requests not answered again: their reply had already been sent.",
)
QUERY_ABANDONED = Counter(
    "memstream_query_abandoned_total",
    "Requests let go unanswered at a rebalance or shutdown (uncommitted: the next owner "
    "answers them, or finds the reply that was on its way).",
)
QUERY_RESCUES = Counter(
    "memstream_query_rescues_total",
    "Requests read by the standby reader, by outcome: own (a partition this worker holds), "
    "taken (answered here: its owner had not begun it in time), left (begun or answered "
    "elsewhere, or not to be answered), dropped (over the reader's bounds).",
    ["outcome"],
)
QUERY_WAITED_FOR = Counter(
    "memstream_query_waited_for_total",
    "Requests found begun elsewhere and still under way (taken over by another worker, or "
    "a hedged copy), waited for: answered (there, so not here) or not_answered (in time: "
    "answered here too).",
    ["outcome"],
)
QUERY_PROCESS_RESTARTS = Counter(
    "memstream_query_process_restarts_total",
    "Times this worker's query process (query.process own) exited and was started again.",
)
QUERY_REBALANCES = Counter(
    "memstream_query_rebalances_total",
    "Rebalances of the query consumer group seen by this worker.",
)
QUERY_BUDGET_TOKENS = Histogram(
    "memstream_query_budget_tokens", "Tokens of the long-memory budget used per reply.",
    buckets=(0, 100, 250, 500, 1000, 2000, 3000, 4000, 8000),
)

# ------------------------------------------------------------------- kafka
CONSUMER_LAG = Gauge(
    "memstream_consumer_lag",
    "Messages behind the log end, by topic and partition.",
    ["topic", "partition"],
)
CONSUMER_PROGRESS = Gauge(
    "memstream_consumer_last_progress_timestamp_seconds",
    "Unix time this worker last advanced a committed offset of any stage.",
)
STAGE_PROGRESS = Gauge(
    "memstream_stage_last_progress_timestamp_seconds",
    "Unix time this worker last advanced a committed offset of the stage "
    "(ingest, consolidation, query); its start time before that.",
    ["stage"],
)
STAGE_LAG = Gauge(
    "memstream_stage_lag",
    "Messages waiting in the stage's partitions owned by this worker (retry topic excluded).",
    ["stage"],
)
REBALANCES = Counter("memstream_rebalances_total", "Consumer group rebalances seen by this worker.")
COMMIT_LATENCY = Histogram(
    "memstream_commit_seconds", "Offset commit latency.", buckets=LATENCY_BUCKETS
)
COMMIT_REFUSED = Counter(
    "memstream_commit_refused_total",
    "Commits held back by the commit guard: Faust counted records as handled that "
    "memstream had not stored or dead-lettered, by topic.",
    ["topic"],
)
GROUP_REJOINS = Counter(
    "memstream_group_rejoins_total",
    "Rebalances the worker asked for so that records passed over are delivered again.",
)

# ---------------------------------------------------------------- erasure
ERASURES = Counter(
    "memstream_erasures_total",
    "Erasure requests handled, by target and outcome (done, repeated, dry_run, rejected, "
    "blocked, requeued: its turn was over, continued from the end of the queue).",
    ["target", "outcome"],
)
ERASURE_BLOCKED = Counter(
    "memstream_erasures_blocked_total",
    "Erasures stopped by an error no attempt mends, by its code: database (a statement "
    "the database refuses for good), provider, internal.",
    ["code"],
)
ERASURE_KEY_MISMATCHES = Counter(
    "memstream_erasure_key_mismatches_total",
    "Erasure requests refused because their record key is not the "
    "``{tenant_id}/{erasure_id}`` their body gives.",
)
ERASED = Counter(
    "memstream_erased_total",
    "Rows, keys and provider copies deleted by erasures, by store.",
    ["store"],
)
ERASURE_SECONDS = Histogram(
    "memstream_erasure_seconds", "Time to carry out one erasure (fence to done).",
    buckets=LATENCY_BUCKETS,
)
ERASURE_SKIPPED = Counter(
    "memstream_erasure_skipped_total",
    "Events and session ends skipped because an erasure covers them, by stage.",
    ["stage"],
)
EPISODES_RETIRED = Counter(
    "memstream_episodes_retired_total",
    "Episodes expired by the episode retention (their conversation's summary covers "
    "them), by tenant and reason (age, count).",
    ["tenant", "reason"],
)
RETENTION_DELETED = Counter(
    "memstream_retention_deleted_total",
    "Rows and keys deleted by the retention runs, by store.",
    ["store"],
)

# ----------------------------------------------------------------- quotas
QUOTA_DECISIONS = Counter(
    "memstream_quota_decisions_total",
    "Requests and events weighed against their tenant's quota on this worker, by tenant, "
    "quota (queries, events, erasures, cube_memories, sessions_consolidating) and decision "
    "(allowed; refused, or dead_lettered for events; shed: a query refused unweighed, "
    "more of its tenant's requests waiting on the worker than it may queue; overloaded: "
    "a query refused while the worker was loaded, its tenant having most of the queries "
    "answered lately; delayed: events held back). A tenant's "
    "series go when it drops out of the quota's most recently seen tenants "
    "(quotas.max_tenants).",
    ["tenant", "quota", "decision"],
)
