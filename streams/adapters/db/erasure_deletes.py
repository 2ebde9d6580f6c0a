"""The database side of erasure and retention: which rows of which table go.

:func:`erasure_steps` turns a :class:`~streams.erasure.model.Selection` into one
:class:`TableStep` per table, in an order where no step needs rows an earlier one
deleted (candidates before their runs, ledger rows before the messages they
name). :class:`TableDeletes` runs a step in chunks, each chunk in one
transaction with the count it adds to the erasure's record, so an interrupted
erasure resumes with exact counts; or only counts (a dry run). Every step is
idempotent: a second run finds nothing left.

The built-in provider's memories (rows, postings, vectors, scope statistics)
are deleted by the provider itself
(:meth:`streams.memory.providers.builtin.provider.BuiltinProvider.erase`);
``memory_origin`` rows go with the provider copies they point to.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, Select, Table, and_, false, func, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from streams.adapters.db import erasure_reads
from streams.adapters.db.schema.consolidation import (
    consolidation_candidate,
    consolidation_ledger,
    consolidation_progress,
    consolidation_run,
    memory_origin,
    pending_expiry,
)
from streams.adapters.db.schema.conversation import (
    conversation_message,
    conversation_session,
    conversation_summary,
    stale_history_mark,
)
from streams.adapters.db.schema.reprocess import (
    reprocess_job,
    reprocess_message,
    reprocess_retire,
    reprocess_session,
)
from streams.adapters.db.schema.stats import memory_search_log
from streams.adapters.db.unavailable import unavailable_on_db_errors
from streams.clock import naive_utc
from streams.erasure.model import EraseConversation, Selection
from streams.erasure.ports import DeleteStep, RecordCounts

CHUNK = 1000

_m, _r = conversation_message.c, consolidation_run.c
_rs, _rj = reprocess_session.c, reprocess_job.c


@dataclass(frozen=True)
class TableStep:
    """Delete the rows of ``table`` matching ``where``; ``chunk_by``: the integer key
    deleted a chunk at a time (None: one statement); ``cached``: the Redis keys of
    the conversations whose rows went must go too (what a retention run deletes)."""

    table: Table
    where: ColumnElement[bool]
    chunk_by: str | None = None
    cached: bool = False

    @property
    def name(self) -> str:
        return self.table.name


def _in(column: ColumnElement[str], values: tuple[str, ...]) -> ColumnElement[bool]:
    return column.in_(values) if values else false()


def _runs(where: ColumnElement[bool]) -> Select[tuple[str]]:
    return select(_r.closed_id).where(where)


def _jobs(tenant_id: str) -> Select[tuple[str]]:
    return select(_rj.job_id).where(_rj.tenant_id == tenant_id)


def erasure_steps(sel: Selection) -> list[TableStep]:
    """The tables an erasure deletes from, in order (memories aside)."""
    t = sel.tenant_id
    if sel.target == "memory":
        return [
            TableStep(consolidation_candidate, and_(
                consolidation_candidate.c.memory_id == sel.subject,
                consolidation_candidate.c.closed_id.in_(_runs(_r.tenant_id == t)))),
            TableStep(reprocess_retire, and_(reprocess_retire.c.memory_id == sel.subject,
                                             reprocess_retire.c.job_id.in_(_jobs(t)))),
        ]
    if sel.target == "tenant":
        mine: Callable[[Table], ColumnElement[bool]] = lambda tb: tb.c.tenant_id == t  # noqa: E731
        runs = _runs(_r.tenant_id == t)
        return [
            TableStep(consolidation_candidate, consolidation_candidate.c.closed_id.in_(runs)),
            TableStep(pending_expiry, mine(pending_expiry)),
            TableStep(consolidation_run, mine(consolidation_run)),
            TableStep(consolidation_ledger, mine(consolidation_ledger)),
            TableStep(consolidation_progress, mine(consolidation_progress)),
            TableStep(reprocess_message, reprocess_message.c.closed_id.in_(
                select(_rs.closed_id).where(_rs.job_id.in_(_jobs(t))))),
            TableStep(reprocess_session, _rs.job_id.in_(_jobs(t))),
            TableStep(reprocess_retire, reprocess_retire.c.job_id.in_(_jobs(t))),
            TableStep(reprocess_job, mine(reprocess_job)),
            TableStep(conversation_summary, mine(conversation_summary)),
            TableStep(conversation_session, mine(conversation_session)),
            TableStep(stale_history_mark, mine(stale_history_mark)),
            TableStep(memory_search_log, mine(memory_search_log)),
            TableStep(memory_origin, mine(memory_origin)),
            TableStep(conversation_message, _m.tenant_id == t, chunk_by="id"),
        ]
    whole, touched = sel.whole, sel.touched
    if sel.target == "user":
        u = sel.subject
        runs = _runs(and_(_r.tenant_id == t, or_(_r.user_id == u, _in(_r.conversation_id, whole))))
        sessions = select(_rs.closed_id).where(_rs.job_id.in_(_jobs(t)), or_(
            _rs.user_id == u, _in(_rs.conversation_id, whole)))
        cand = consolidation_candidate.c
        ledger = consolidation_ledger.c
        said = select(_m.event_id).where(_m.tenant_id == t, _m.user_id == u)
        return [
            TableStep(consolidation_candidate, or_(cand.closed_id.in_(runs), and_(
                cand.user_id == u, cand.closed_id.in_(_runs(_r.tenant_id == t))))),
            TableStep(pending_expiry, and_(pending_expiry.c.tenant_id == t,
                                           pending_expiry.c.user_id == u)),
            TableStep(consolidation_run, and_(_r.tenant_id == t, or_(
                _r.user_id == u, _in(_r.conversation_id, whole)))),
            TableStep(consolidation_ledger, and_(ledger.tenant_id == t, or_(
                _in(ledger.conversation_id, whole), ledger.event_id.in_(said)))),
            *_conversation_rows(t, whole, touched),
            TableStep(reprocess_message, reprocess_message.c.closed_id.in_(sessions)),
            TableStep(reprocess_session, _rs.closed_id.in_(sessions)),
            TableStep(reprocess_retire, and_(reprocess_retire.c.job_id.in_(_jobs(t)),
                                             reprocess_retire.c.user_id == u)),
            TableStep(reprocess_job, and_(_rj.tenant_id == t, _rj.user_id == u,
                                          _rj.active.is_(None))),
            TableStep(memory_search_log, and_(memory_search_log.c.tenant_id == t,
                                              memory_search_log.c.user_id == u)),
            TableStep(memory_origin, and_(memory_origin.c.tenant_id == t,
                                          memory_origin.c.user_id == u)),
            TableStep(conversation_message, and_(_m.tenant_id == t, _m.user_id == u),
                      chunk_by="id"),
        ]
    c = sel.subject  # one conversation, every speaker (a sub-agent's: in its parents too)
    runs = _runs(and_(_r.tenant_id == t, _r.conversation_id == c))
    sessions = select(_rs.closed_id).where(_rs.job_id.in_(_jobs(t)), _rs.conversation_id == c)
    sub_agent = select(_m.event_id).where(_m.tenant_id == t, _m.origin_conversation_id == c)
    ledger = consolidation_ledger.c
    return [
        TableStep(consolidation_candidate, consolidation_candidate.c.closed_id.in_(runs)),
        TableStep(pending_expiry, pending_expiry.c.closed_id.in_(runs)),
        TableStep(consolidation_run, and_(_r.tenant_id == t, _r.conversation_id == c)),
        TableStep(consolidation_ledger, and_(ledger.tenant_id == t, or_(
            ledger.conversation_id == c, ledger.event_id.in_(sub_agent)))),
        *_conversation_rows(t, whole or (c,), touched or (c,)),
        TableStep(reprocess_message, reprocess_message.c.closed_id.in_(sessions)),
        TableStep(reprocess_session, _rs.closed_id.in_(sessions)),
        TableStep(memory_origin, and_(memory_origin.c.tenant_id == t,
                                      memory_origin.c.conversation_id == c)),
        TableStep(conversation_message, and_(_m.tenant_id == t, or_(
            _m.conversation_id == c, _m.origin_conversation_id == c)), chunk_by="id"),
    ]


def _conversation_rows(tenant_id: str, whole: tuple[str, ...],
                       touched: tuple[str, ...]) -> list[TableStep]:
    """What belongs to a conversation rather than to a message: the consolidation
    progress and session numbers (conversations that go whole), the summary and the
    stale-history mark (every conversation touched: the summary was made from the
    erased messages too)."""
    def of(table: Table, ids: tuple[str, ...]) -> TableStep:
        return TableStep(table, and_(table.c.tenant_id == tenant_id,
                                     _in(table.c.conversation_id, ids)))
    return [of(consolidation_progress, whole), of(conversation_summary, touched),
            of(conversation_session, whole), of(stale_history_mark, touched)]


def retention_steps(messages_before: datetime | None,
                    summaries_before: datetime | None) -> list[TableStep]:
    """Messages created before ``messages_before`` (with their ledger rows) and
    summaries last updated before ``summaries_before``, in every tenant."""
    steps = []
    if messages_before is not None:
        before = naive_utc(messages_before)
        steps += [
            TableStep(consolidation_ledger, consolidation_ledger.c.message_id.in_(
                select(_m.id).where(_m.created_at < before))),
            TableStep(conversation_message, _m.created_at < before, chunk_by="id", cached=True),
        ]
    if summaries_before is not None:
        steps.append(TableStep(conversation_summary, conversation_summary.c.updated_at
                               < naive_utc(summaries_before), cached=True))
    return steps


def _table_step(step: DeleteStep) -> TableStep:
    assert isinstance(step, TableStep), f"not a step of these tables: {step!r}"
    return step


class TableDeletes:
    """:class:`~streams.erasure.ports.Deletes` over the database tables; what the
    erasure and the retention call raises :class:`~streams.stores.StoreUnavailable`
    on a database failure (:meth:`conversations_of`, which an ingest fence reads,
    raises the driver's error)."""

    def __init__(self, engine: AsyncEngine, *, chunk: int = CHUNK) -> None:
        self.engine = engine
        self.chunk = chunk

    def erasure_steps(self, sel: Selection) -> list[TableStep]:
        return erasure_steps(sel)

    def retention_steps(self, messages_before: datetime | None,
                        summaries_before: datetime | None) -> list[TableStep]:
        return retention_steps(messages_before, summaries_before)

    @unavailable_on_db_errors
    async def count(self, step: DeleteStep) -> int:
        step = _table_step(step)
        async with self.engine.connect() as conn:
            return int((await conn.execute(
                select(func.count()).select_from(step.table).where(step.where))).scalar_one())

    @unavailable_on_db_errors
    async def delete(self, step: DeleteStep, record: RecordCounts | None = None,
                     touched: Callable[[list[tuple[str, str]]], Awaitable[None]] | None = None,
                     ) -> int:
        """Delete the step's rows; ``record`` adds each chunk's count in its
        transaction. ``touched`` hears, after each chunk, the (tenant, conversation)
        pairs it deleted rows of (tables with a ``conversation_id``)."""
        step = _table_step(step)
        done = 0
        while True:
            async with self.engine.begin() as conn:
                n, pairs = await self._chunk(conn, step, touched is not None)
                if n and record is not None:
                    await record(conn, {step.name: n})
            done += n
            if pairs and touched is not None:
                await touched(pairs)
            if step.chunk_by is None or n < self.chunk:
                return done

    async def _chunk(self, conn: AsyncConnection, step: TableStep,
                     want_pairs: bool) -> tuple[int, list[tuple[str, str]]]:
        c = step.table.c
        pairs: list[tuple[str, str]] = []
        with_pairs = want_pairs and "conversation_id" in c
        if step.chunk_by is None:
            if with_pairs:
                pairs = [(str(t), str(v)) for t, v in (await conn.execute(
                    select(c.tenant_id, c.conversation_id).where(step.where).distinct())).all()]
            n = (await conn.execute(step.table.delete().where(step.where))).rowcount
            return int(n or 0), pairs
        key = c[step.chunk_by]
        cols = [key, c.tenant_id, c.conversation_id] if with_pairs else [key]
        rows = (await conn.execute(select(*cols).where(step.where).order_by(key)
                                   .limit(self.chunk))).all()
        if not rows:
            return 0, []
        n = (await conn.execute(step.table.delete().where(key.in_([r[0] for r in rows])))).rowcount
        if with_pairs:
            pairs = sorted({(str(r[1]), str(r[2])) for r in rows})
        return int(n or 0), pairs

    @unavailable_on_db_errors
    async def candidates_from(self, tenant_id: str, conversations: Sequence[str],
                              events: set[str], record: RecordCounts) -> int:
        """Delete the candidates consolidated in ``conversations`` from any of ``events``
        (the judged text of a sub-agent's messages, in its parents' runs)."""
        c = consolidation_candidate.c
        q = (select(c.closed_id, c.seq, c.source_event_ids)
             .where(c.closed_id.in_(_runs(and_(_r.tenant_id == tenant_id,
                                                _r.conversation_id.in_(list(conversations)))))))
        async with self.engine.begin() as conn:
            keys = [(str(r.closed_id), int(r.seq)) for r in await conn.execute(q)
                    if events & set(json_ids(r.source_event_ids))]
            n = 0
            for closed_id, seq in keys:
                n += int((await conn.execute(consolidation_candidate.delete().where(
                    c.closed_id == closed_id, c.seq == seq))).rowcount or 0)
            if n:
                await record(conn, {consolidation_candidate.name: n})
        return n

    @unavailable_on_db_errors
    async def agents_of(self, tenant_id: str, *, user_id: str | None = None,
                        conversation_id: str | None = None) -> list[str]:
        """The agents a user spoke to, or that spoke in a conversation."""
        where = (_m.user_id == user_id) if user_id is not None else (
            _m.conversation_id == conversation_id)
        async with self.engine.connect() as conn:
            return [str(a) for a in (await conn.execute(select(_m.agent_id).where(
                _m.tenant_id == tenant_id, where).distinct())).scalars()]

    @unavailable_on_db_errors
    async def sub_agent_messages(self, tenant_id: str,
                                 conversation_id: str) -> tuple[list[str], set[str]]:
        """A sub-agent conversation's messages stored in their parents: the parents,
        and the messages' event ids (nothing for any other conversation)."""
        async with self.engine.connect() as conn:
            rows = (await conn.execute(select(_m.conversation_id, _m.event_id).where(
                _m.tenant_id == tenant_id, _m.origin_conversation_id == conversation_id))).all()
        return sorted({str(r.conversation_id) for r in rows}), {str(r.event_id) for r in rows}

    @unavailable_on_db_errors
    async def speakers(self, tenant_id: str, conversation_id: str) -> list[str]:
        """The users with messages in a conversation."""
        async with self.engine.connect() as conn:
            return [str(u) for u in (await conn.execute(select(_m.user_id).where(
                _m.tenant_id == tenant_id, _m.conversation_id == conversation_id).distinct()
            )).scalars()]

    @unavailable_on_db_errors
    async def user_conversations(self, tenant_id: str,
                                 user_id: str) -> list[EraseConversation]:
        """:meth:`conversations_of`, for the erasure."""
        return await self.conversations_of(tenant_id, user_id)

    async def conversations_of(self, tenant_id: str, user_id: str) -> list[EraseConversation]:
        """The conversations ``user_id`` has messages in; ``whole`` when nobody else does."""
        return await erasure_reads.conversations_of(self.engine, tenant_id, user_id)


def json_ids(raw: object) -> list[str]:
    """Event ids as stored (a JSON list), tolerating what is not one."""
    try:
        value = json.loads(raw) if isinstance(raw, str) else []
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []
