"""Prometheus metrics of every stage. Label sets are bounded: no user,
conversation or message ids ever become labels."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
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
INGEST_BATCH = Histogram(
    "memstream_ingest_batch_size", "Events per ingest batch.", buckets=BATCH_BUCKETS
)
SINK_LATENCY = Histogram(
    "memstream_sink_write_seconds", "Time to write one batch, by sink.", ["sink"], buckets=LATENCY_BUCKETS
)
SINK_FAILURES = Counter(
    "memstream_sink_failures_total", "Failed batch writes, by sink and error class.", ["sink", "error"]
)
SINK_RETRIES = Counter(
    "memstream_sink_retries_total", "Batch writes retried after a failure, by sink.", ["sink"]
)
CACHE_READS = Counter(
    "memstream_cache_reads_total",
    "Session reads by cache result: hit, miss, error, disabled, bypass.",
    ["result"],
)
CACHE_BACKFILLS = Counter(
    "memstream_cache_backfills_total", "Conversation lists rebuilt from the database, by outcome.", ["outcome"]
)

# --------------------------------------------------------------- sessions
SESSIONS_OPEN = Gauge("memstream_sessions_open", "Open sessions in this worker's table partitions.")
SESSIONS_CLOSED = Counter(
    "memstream_sessions_closed_total", "Sessions closed, by trigger (explicit, idle).", ["trigger"]
)
