"""Outbox publishing: what ingest sends, and the session-closed events leaving
the states' outboxes.

Every record ingest sends (dead letters, re-routed events, session-closed
events) is delivered with retries until the broker takes it. A closing event
sits in its state's outbox (:class:`~streams.session.model.SessionState`) until
it was published: the states are in the table before the events go out, and
each event leaves its outbox only then, so a crash anywhere leaves it to be
published again. While a batch publishes the closing events of a conversation,
a later batch planning that conversation waits (:meth:`ClosingEvents.wait`):
planned over the state before those events left its outbox, it would publish
them a second time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from streams import tracing
from streams.backoff import retry_forever
from streams.ingest.model import IngestConfig
from streams.session.model import SessionState, table_key
from streams.session.rules.batch import SessionPlan
from streams.session.state_buffer import SessionStateBuffer
from streams.wire.envelope import Outgoing, Publisher, SourceRecord
from streams.wire.records import SessionClosed


class Delivery:
    """Sends through ``publisher``, retrying until it is taken."""

    def __init__(self, publisher: Publisher, config: IngestConfig) -> None:
        self.publisher = publisher
        self.config = config

    async def __call__(self, records: Sequence[Outgoing], what: str) -> None:
        if records:
            await retry_forever(
                lambda: self.publisher.publish(records), what=what,
                initial_s=self.config.retry_initial_s, max_s=self.config.retry_max_s,
            )


class ClosingEvents:
    def __init__(self, config: IngestConfig, states: SessionStateBuffer,
                 deliver: Delivery) -> None:
        self.config = config
        self.states = states
        self.deliver = deliver
        # conversation -> done, while an earlier batch's stage two publishes its
        # closing events (they leave the outbox only then)
        self._publishing: dict[str, asyncio.Future[None]] = {}

    async def wait(self, keys: set[str]) -> None:
        """Wait until no earlier batch is publishing closing events of ``keys``:
        planned over the state before those events left its outbox, this batch
        would publish them a second time."""
        while waits := {f for key in keys if (f := self._publishing.get(key)) is not None}:
            await asyncio.wait(waits)

    def begin(self, plan: SessionPlan) -> None:
        """The batch of ``plan`` is to publish its closing events."""
        if plan.publish:
            done = asyncio.get_running_loop().create_future()
            for c in plan.publish:
                self._publishing[table_key(c.tenant_id, c.conversation_id)] = done

    async def publish(self, plan: SessionPlan, last: dict[str, SourceRecord],
                      causes: Mapping[str, SourceRecord]) -> None:
        """Deliver the plan's closing events (their states are in the table), then
        empty their outboxes. ``last``: the batch's last record of each conversation;
        ``causes``: the record that closed each session this batch closed, by
        ``closed_id``."""
        if plan.publish:
            closed = [self._closing(c, causes.get(c.closed_id)) for c in plan.publish]
            await self.deliver(closed, "session-closed")
            self._sent(plan, last)

    def _closing(self, c: SessionClosed, cause: SourceRecord | None) -> Outgoing:
        """The record of closing event ``c``, in the trace of ``cause`` (its session
        end; the message after a gap in event time; the first late message; the scan's
        idle check; none for an event of an earlier batch published again): a span
        "session close" names the session, and the record carries its context."""
        topic = self.config.session_closed_topic
        with tracing.consumer_span("session close", cause.headers if cause else None, {
                tracing.TENANT: c.tenant_id, "memstream.trigger": c.trigger,
                "memstream.session_seq": c.session_seq, "memstream.part": c.part,
                "memstream.messages": c.message_count}), tracing.producer_span(topic):
            return Outgoing(topic, c.conversation_id.encode(), c.model_dump_json().encode(),
                            tracing.with_context())

    def done(self, plan: SessionPlan) -> None:
        """Let batches waiting on this one's closing events go on (after a
        failure too: the events are still in the outboxes)."""
        done = {self._publishing.pop(key, None)
                for key in {table_key(c.tenant_id, c.conversation_id) for c in plan.publish}}
        for f in done:
            if f is not None and not f.done():
                f.set_result(None)

    def _sent(self, plan: SessionPlan, last: dict[str, SourceRecord]) -> None:
        """Empty the outboxes of what was published, on the newest state of each,
        and write them at once (the session scan reads the table: a state left
        saying "unpublished" would be sent an idle check for nothing)."""
        ids = {c.closed_id for c in plan.publish}
        changed = False
        for key in plan.states:
            state = SessionState.from_table(self.states.get(key))
            if state is not None and state.sent(ids):
                self.states.stage(key, state.to_table(), last[key])
                changed = True
        if changed:
            self.states.flush()
