"""⑥ Forgetting: erasure on request and retention. Open ``executor.py`` first.

An erasure request (``memory.erasures``, or ``memstream erase``) names a user,
a conversation, one memory or a whole tenant. :class:`~streams.erasure.executor.ErasureExecutor`
records who and up to where (never what), sends a fence through every ingest
partition (each takes the erasure in and tombstones the sessions-table entries
it holds of it), then deletes everything stored of the subject — messages,
summaries, session rows, ledger, runs and candidates, long-term memories in
every provider, search logs, Redis keys — and answers with a receipt of counts.
:mod:`.registry` keeps each worker's view of the erasures current, so ingest,
consolidation and replays skip what an erasure covers
(:mod:`.rules.coverage`), and drops the in-process caches when one finishes.
:mod:`.retention` deletes messages and summaries past a configured age by the
same paths.
"""
