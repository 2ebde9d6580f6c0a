"""③ Session-end consolidation: from Session memory to User and Agent memory.
Open ``pipeline.py`` first.

One closing event (``SessionClosed`` on ``memory.session-closed``) goes through
:class:`~streams.consolidation.pipeline.ConsolidationPipeline`:

1. **claim** (:class:`~.ports.Ledger`): in one transaction, the conversation's messages
   not yet claimed are recorded in the durable ledger under the event's
   ``closed_id``, together with the run (:class:`~.model.Run`, :class:`~.ports.Runs`)
   that fixes the provider and whether long memory applies;
2. **judge** (:mod:`.judge`, rules in :mod:`.rules`): the model, or the rule judge, over the claimed
   messages; then local dedup, plus episodic memories for the built-in
   provider; the result is persisted before anything is written;
3. **decide and write** (:mod:`.writer`): per cube, under the cube's lock
   (:class:`~streams.memory.cube_locks.CubeLocks`, shared by every worker), the
   provider's own search and one conflict decision per cube batch (persisted), then
   each write, recorded
   with the id the provider gave it; then the expiries of what it supersedes
   (a failed expiry is left to :mod:`.expiry`);
4. **summary** (:mod:`.summarizer`) when enough messages are not covered;
5. the run is marked done.

Every step is idempotent on ``closed_id``, so a redelivered or retried event
resumes where the previous attempt stopped; a different closing event (a
repeated session end, a topic replayed from offset 0) finds the messages
already claimed. The nouns are in :mod:`.model`, what the stage needs from the
stores in :mod:`.ports`. :mod:`.processor` runs pipelines for a batch of events,
:mod:`.failures` and :mod:`.retry_scheduler` handle ``memory.retry`` and
``memory.dlq``.
"""
