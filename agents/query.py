"""Query: memory lookups on memory.queries, one reply per request.

Not a Faust agent: the requests are read by the worker's query consumer
(``streams/adapters/kafka/query_consumer.py``), in a consumer group of its own, so Faust's
rebalances never hold them up. It starts with the app, after table recovery
(the agent-config table routes the lookups), and "Worker ready" waits for its
first partition assignment. The worker's shutdown (``streams/worker/context.py``) stops
it before the runtime closes. With ``query.process`` ``own`` the worker answers no query
itself: it starts its query process (``streams/worker/query_process.py``) instead.
"""

from __future__ import annotations

import logging

from mode import Service

from streams.worker.app import app, settings
from streams.worker.context import record_tenant, worker

log = logging.getLogger(__name__)


@app.service
class QueryConsumerService(Service):
    async def on_start(self) -> None:
        wait_s = 3 * settings.query.session_timeout_s
        if worker.own_query_process:  # answered in a process of its own beside the worker
            if not await worker.start_query_process(wait_s):
                log.warning("the query process has no partitions after %.0fs", wait_s)
            return
        answering = await worker.query_answering()
        # a request its tenant's queue has no room for is refused at once (shed)
        # the worker's background stages wait at their checkpoints while it answers
        worker.queries.start(worker.foreground.serve(answering, tenant=record_tenant),
                             shed=answering.shed)
        await worker.start_rescue()
        if not await worker.queries.wait_assigned(wait_s):
            log.warning("the query consumer has no partitions after %.0fs; it keeps trying",
                        wait_s)

    async def on_stop(self) -> None:
        await worker.stop_query_process()
        await worker.stop_rescue()
        await worker.queries.stop()
