"""memstream: a Kafka-native memory service for AI agents.

The flow, stage by stage (each package's ``__init__`` names the file to open first):

1. :mod:`streams.ingest` — ``chat.messages`` into MySQL rows, Redis lists and the
   per-conversation session state;
2. :mod:`streams.session` — Session memory: the session state and its rules, idle
   closes, the read path of recent history (token window, summary);
3. :mod:`streams.consolidation` — a closed session into long-term memories: judge,
   dedup, conflicts, write, retries;
4. :mod:`streams.memory` — long-term memory: the provider contract, the built-in
   provider, MemOS and Mem0, routing by agent configuration;
5. :mod:`streams.query` — ``memory.queries`` answered: recent history plus ranked
   memories within a token budget, one reply per request;
6. :mod:`streams.erasure` — forgetting: a user, a conversation, a memory or a
   tenant erased from every store on request, and retention by age.

Beside the stages: :mod:`streams.wire` (every byte-level contract),
:mod:`streams.adapters` (Kafka, database, Redis, HTTP, embeddings),
:mod:`streams.worker` (the Faust worker and the one composition root,
:mod:`streams.worker.wiring`), :mod:`streams.quotas` (quotas per tenant),
:mod:`streams.stats` (the read-only stats API),
:mod:`streams.cli` (the ``memstream`` command) and :mod:`streams.devtools`.
"""

__version__ = "0.1.0"
