"""The database side of erasure and retention: which rows of which table go.

:func:`erasure_steps` turns a :class:`~streams.erasure.model.Selection` into one
:class:`TableStep` per table, in an order where no step needs rows an earlier one
deleted (candidates before their runs, ledger rows before the messages they
name). :class:`TableDeletes` runs a step in chunks, each chunk in one
transaction with the count it adds to the erasure's record, so an interrupted
erasure resumes with exact counts; or only counts (a dry run). Every step is
idempotent: a second run finds nothing left. The messages an erasure deletes
that its cutoff does not cover (dated after it) are remembered in
``erased_event`` in the chunk's transaction, so ingest refuses them when they
are sent again.

Every condition starts from the tenant and the subject (or the retention's
time) through an index (migration 0014). A chunk is found with a ``SELECT ...
LIMIT`` (which MariaDB joins through those indexes) and deleted by primary key:
MariaDB reads a single-table ``DELETE ... IN (SELECT ...)`` row by row through
the whole table. ``tests/integration/test_erasure_explain.py`` EXPLAINs every
statement an erasure sends.

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
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    Table,
    and_,
    exists,
    false,
    func,
    or_,
    select,
    tuple_,
    union,
)
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from streams.adapters.db import erasure_reads
from streams.adapters.db.engine import insert_ignoring_duplicates
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
from streams.adapters.db.schema.erasure import erased_event
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
class Remember:
    """Messages dated after ``cutoff`` that erasure ``seq`` deletes are remembered in
    ``erased_event``: its cutoff does not cover them when they are sent again."""

    cutoff: datetime  # naive UTC
    seq: int


@dataclass(frozen=True)
class TableStep:
    """Delete the rows of ``table`` matching any of ``parts`` (each a condition an
    index serves: an ``OR`` of two subqueries is split in two, as no index serves
    it), a chunk of primary keys per transaction; ``cached``: the Redis keys of the
    conversations whose rows went must go too (what a retention run deletes);
    ``remember``: the messages the cutoff does not cover are remembered (an
    erasure's messages)."""

    table: Table
    parts: tuple[ColumnElement[bool], ...]
    cached: bool = False
    remember: Remember | None = None

    @property
    def name(self) -> str:
        return self.table.name


def step(table: Table, *parts: ColumnElement[bool], cached: bool = False,
         remember: Remember | None = None) -> TableStep:
    return TableStep(table, parts, cached, remember)


def _messages(sel: Selection, *parts: ColumnElement[bool]) -> TableStep:
    """The erasure's step of ``conversation_message``: what its cutoff does not cover
    is remembered as it goes."""
    return step(conversation_message, *parts, remember=Remember(
        naive_utc(sel.cutoff), sel.seq) if sel.cutoff is not None else None)


def _in(column: ColumnElement[str], values: tuple[str, ...]) -> ColumnElement[bool]:
    return column.in_(values) if values else false()


def _runs(where: ColumnElement[bool]) -> Select[tuple[str]]:
    return select(_r.closed_id).where(where)


def _jobs(tenant_id: str) -> Select[tuple[str]]:
    return select(_rj.job_id).where(_rj.tenant_id == tenant_id)


def erasure_steps(sel: Selection) -> list[TableStep]:
    """The tables an erasure deletes from, in order (memories aside). Every condition
    starts from the tenant and the subject through an index (migration 0014), so a
    step reads the subject's rows, not the table."""
    t = sel.tenant_id
    cand, ledger, expiry = consolidation_candidate.c, consolidation_ledger.c, pending_expiry.c
    if sel.target == "memory":
        return [
            step(consolidation_candidate, and_(cand.memory_id == sel.subject,
                                               cand.closed_id.in_(_runs(_r.tenant_id == t)))),
            step(reprocess_retire, and_(reprocess_retire.c.memory_id == sel.subject,
                                        reprocess_retire.c.job_id.in_(_jobs(t)))),
        ]
    if sel.target == "tenant":
        mine: Callable[[Table], ColumnElement[bool]] = lambda tb: tb.c.tenant_id == t  # noqa: E731
        return [
            step(consolidation_candidate, cand.closed_id.in_(_runs(_r.tenant_id == t))),
            step(pending_expiry, mine(pending_expiry)),
            step(consolidation_run, mine(consolidation_run)),
            step(consolidation_ledger, mine(consolidation_ledger)),
            step(consolidation_progress, mine(consolidation_progress)),
            step(reprocess_message, reprocess_message.c.closed_id.in_(
                select(_rs.closed_id).where(_rs.job_id.in_(_jobs(t))))),
            step(reprocess_session, _rs.job_id.in_(_jobs(t))),
            step(reprocess_retire, reprocess_retire.c.job_id.in_(_jobs(t))),
            step(reprocess_job, mine(reprocess_job)),
            step(conversation_summary, mine(conversation_summary)),
            step(conversation_session, mine(conversation_session)),
            step(stale_history_mark, mine(stale_history_mark)),
            step(memory_search_log, mine(memory_search_log)),
            step(memory_origin, mine(memory_origin)),
            _messages(sel, _m.tenant_id == t),
        ]
    whole, touched = sel.whole, sel.touched
    if sel.target == "user":
        u = sel.subject
        theirs = and_(_r.tenant_id == t, or_(_r.user_id == u, _in(_r.conversation_id, whole)))
        sessions = select(_rs.closed_id).where(_rs.job_id.in_(_jobs(t)), or_(
            _rs.user_id == u, _in(_rs.conversation_id, whole)))
        said = select(_m.event_id).where(_m.tenant_id == t, _m.user_id == u)
        return [
            step(consolidation_candidate, cand.closed_id.in_(_runs(theirs)),
                 and_(cand.user_id == u, cand.closed_id.in_(_runs(_r.tenant_id == t)))),
            step(pending_expiry, and_(expiry.tenant_id == t, expiry.user_id == u)),
            step(consolidation_run, theirs),
            # the ledger rows of the conversations that go whole, and of the user's
            # messages (in the conversations they spoke in)
            step(consolidation_ledger,
                 and_(ledger.tenant_id == t, _in(ledger.conversation_id, whole)),
                 and_(ledger.tenant_id == t, _in(ledger.conversation_id, touched),
                      ledger.event_id.in_(said))),
            *_conversation_rows(t, whole, touched),
            step(reprocess_message, reprocess_message.c.closed_id.in_(sessions)),
            step(reprocess_session, and_(_rs.job_id.in_(_jobs(t)), or_(
                _rs.user_id == u, _in(_rs.conversation_id, whole)))),
            step(reprocess_retire, and_(reprocess_retire.c.job_id.in_(_jobs(t)),
                                        reprocess_retire.c.user_id == u)),
            step(reprocess_job, and_(_rj.tenant_id == t, _rj.user_id == u,
                                     _rj.active.is_(None))),
            step(memory_search_log, and_(memory_search_log.c.tenant_id == t,
                                         memory_search_log.c.user_id == u)),
            step(memory_origin, and_(memory_origin.c.tenant_id == t,
                                     memory_origin.c.user_id == u)),
            _messages(sel, and_(_m.tenant_id == t, _m.user_id == u)),
        ]
    c = sel.subject  # one conversation, every speaker (a sub-agent's: in its parents too)
    runs = _runs(and_(_r.tenant_id == t, _r.conversation_id == c))
    sessions = select(_rs.closed_id).where(_rs.job_id.in_(_jobs(t)), _rs.conversation_id == c)
    sub_agent = select(_m.event_id).where(_m.tenant_id == t, _m.origin_conversation_id == c)
    return [
        step(consolidation_candidate, cand.closed_id.in_(runs)),
        step(pending_expiry, expiry.closed_id.in_(runs)),
        step(consolidation_run, and_(_r.tenant_id == t, _r.conversation_id == c)),
        # its own ledger rows, and those of its messages stored in its parents
        step(consolidation_ledger,
             and_(ledger.tenant_id == t, ledger.conversation_id == c),
             and_(ledger.tenant_id == t, _in(ledger.conversation_id, touched or (c,)),
                  ledger.event_id.in_(sub_agent))),
        *_conversation_rows(t, whole or (c,), touched or (c,)),
        step(reprocess_message, reprocess_message.c.closed_id.in_(sessions)),
        step(reprocess_session, and_(_rs.job_id.in_(_jobs(t)), _rs.conversation_id == c)),
        step(memory_origin, and_(memory_origin.c.tenant_id == t,
                                 memory_origin.c.conversation_id == c)),
        _messages(sel, and_(_m.tenant_id == t, _m.conversation_id == c),
                  and_(_m.tenant_id == t, _m.origin_conversation_id == c)),
    ]


def _conversation_rows(tenant_id: str, whole: tuple[str, ...],
                       touched: tuple[str, ...]) -> list[TableStep]:
    """What belongs to a conversation rather than to a message: the consolidation
    progress and session numbers (conversations that go whole), the summary and the
    stale-history mark (every conversation touched: the summary was made from the
    erased messages too)."""
    def of(table: Table, ids: tuple[str, ...]) -> TableStep:
        return step(table, and_(table.c.tenant_id == tenant_id,
                                _in(table.c.conversation_id, ids)))
    return [of(consolidation_progress, whole), of(conversation_summary, touched),
            of(conversation_session, whole), of(stale_history_mark, touched)]


def retention_steps(messages_before: datetime | None,
                    summaries_before: datetime | None) -> list[TableStep]:
    """Messages memstream stored before ``messages_before`` (their ``ingested_at``,
    never the client's ``created_at``) that are consolidated (:func:`consolidated`),
    with their ledger rows, and summaries last updated before ``summaries_before``,
    in every tenant."""
    steps = []
    if messages_before is not None:
        old = and_(_m.ingested_at < naive_utc(messages_before), consolidated())
        ledger = consolidation_ledger.c
        steps += [
            # found from the messages (their time index), each ledger row by its
            # conversation and message
            step(consolidation_ledger, tuple_(
                ledger.tenant_id, ledger.conversation_id, ledger.message_id).in_(
                select(_m.tenant_id, _m.conversation_id, _m.id).where(old))),
            step(conversation_message, old, cached=True),
            # never ``erased_event``: a message is aged from when it was stored, so an
            # erased one sent again would start a new retention: its id is kept as
            # long as the erasure record
        ]
    if summaries_before is not None:
        steps.append(step(conversation_summary, conversation_summary.c.updated_at
                          < naive_utc(summaries_before), cached=True))
    return steps


def consolidated() -> ColumnElement[bool]:
    """A message whose consolidation is over: its session was claimed (its number
    at most the conversation's ``claimed_session_seq``; a message stored before
    sessions were stamped, at most ``claimed_until_id``), and no run of its
    conversation is unfinished or has a part still to come (``has_more``: kept
    until that run is purged with the ledger retention)."""
    p, r = consolidation_progress.c, consolidation_run.c
    claimed = exists().where(
        p.tenant_id == _m.tenant_id, p.conversation_id == _m.conversation_id,
        or_(_m.session_seq <= p.claimed_session_seq,
            and_(_m.session_seq.is_(None), _m.id <= p.claimed_until_id)))
    # a count, not NOT EXISTS: MariaDB turns that into a materialised scan of every run;
    # a dependent count reads the conversation's runs through their index
    busy = select(func.count()).select_from(consolidation_run).where(
        r.tenant_id == _m.tenant_id, r.conversation_id == _m.conversation_id,
        or_(r.status != "done", r.has_more.is_(True))).scalar_subquery()
    return and_(claimed, busy == 0)


def _key(table: Table) -> list[ColumnElement[object]]:
    return list(table.primary_key.columns)


def by_keys(keys: Sequence[ColumnElement[Any]],
            values: Sequence[Sequence[object]]) -> ColumnElement[bool]:
    """The rows with these primary keys, as an index range on MariaDB: a list of keys
    of one column, or of tuples; a single tuple as equalities (MariaDB reads ``(a, b)
    IN ((x, y))`` as a row comparison no index serves)."""
    if len(keys) == 1:
        return keys[0].in_([v[0] for v in values])
    if len(values) == 1:
        return and_(*(k == v for k, v in zip(keys, values[0], strict=True)))
    return tuple_(*keys).in_([tuple(v) for v in values])


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
        """The rows the step would delete (a row matching several parts counts once)."""
        step = _table_step(step)
        if len(step.parts) == 1:
            q = select(func.count()).select_from(step.table).where(step.parts[0])
        else:
            keys = _key(step.table)
            q = select(func.count()).select_from(
                union(*(select(*keys).where(p) for p in step.parts)).subquery())
        async with self.engine.connect() as conn:
            return int((await conn.execute(q)).scalar_one())

    @unavailable_on_db_errors
    async def delete(self, step: DeleteStep, record: RecordCounts | None = None,
                     touched: Callable[[list[tuple[str, str]]], Awaitable[None]] | None = None,
                     stop: Callable[[], bool] | None = None) -> int:
        """Delete the step's rows, a chunk per transaction; ``record`` adds each
        chunk's count in its transaction. ``touched`` hears, after each chunk, the
        (tenant, conversation) pairs it deleted rows of (tables with a
        ``conversation_id``); ``stop`` is asked after each chunk (True: the rest stays
        for the next call)."""
        step = _table_step(step)
        done = 0
        for part in step.parts:
            while True:
                async with self.engine.begin() as conn:
                    found, n, pairs = await self._chunk(conn, step.table, part,
                                                        touched is not None, step.remember)
                    if n and record is not None:
                        await record(conn, {step.name: n})
                done += n
                if pairs and touched is not None:
                    await touched(pairs)
                if found < self.chunk:
                    break
                if stop is not None and stop():
                    return done
        return done

    async def _chunk(self, conn: AsyncConnection, table: Table, where: ColumnElement[bool],
                     want_pairs: bool, remember: Remember | None = None,
                     ) -> tuple[int, int, list[tuple[str, str]]]:
        """Up to ``chunk`` rows matching ``where`` found, then deleted by their primary
        keys (no ORDER BY: it would lead the optimizer down the primary key instead of
        the index ``where`` starts from); how many were found and deleted, and the
        pairs they belonged to. ``remember``: the messages dated after its cutoff are
        remembered first, in the same transaction."""
        c = table.c
        keys = _key(table)
        with_pairs = want_pairs and "conversation_id" in c
        extra = [c.tenant_id, c.conversation_id] if with_pairs else []
        late = [c.tenant_id, c.event_id, c.created_at] if remember is not None else []
        rows = (await conn.execute(select(*keys, *extra, *late).where(where)
                                   .limit(self.chunk))).all()
        if not rows:
            return 0, 0, []
        width = len(keys)
        found = [tuple(r[:width]) for r in rows]
        if remember is not None:
            await self._remember(conn, remember, [tuple(r[-3:]) for r in rows])
        n = int((await conn.execute(table.delete().where(by_keys(keys, found)))).rowcount or 0)
        pairs = sorted({(str(r[width]), str(r[width + 1])) for r in rows}) if with_pairs else []
        return len(rows), n, pairs

    async def _remember(self, conn: AsyncConnection, remember: Remember,
                        messages: Sequence[tuple[object, ...]]) -> None:
        """Record the messages (tenant, event id, time) dated after the cutoff."""
        rows = [{"tenant_id": tenant, "event_id": event_id, "created_at": at,
                 "seq": remember.seq} for tenant, event_id, at in messages
                if isinstance(at, datetime) and at > remember.cutoff]
        if rows:
            await conn.execute(insert_ignoring_duplicates(
                self.engine, erased_event, ["tenant_id", "event_id"]), rows)

    @unavailable_on_db_errors
    async def candidates_from(self, tenant_id: str, conversations: Sequence[str],
                              events: set[str], record: RecordCounts) -> int:
        """Delete the candidates consolidated in ``conversations`` from any of ``events``
        (the judged text of a sub-agent's messages, in its parents' runs), a chunk per
        transaction."""
        c = consolidation_candidate.c
        q = (select(c.closed_id, c.seq, c.source_event_ids)
             .where(c.closed_id.in_(_runs(and_(_r.tenant_id == tenant_id,
                                                _r.conversation_id.in_(list(conversations)))))))
        async with self.engine.connect() as conn:
            keys = [(str(r.closed_id), int(r.seq)) for r in await conn.execute(q)
                    if events & set(json_ids(r.source_event_ids))]
        n = 0
        for i in range(0, len(keys), self.chunk):
            async with self.engine.begin() as conn:
                done = int((await conn.execute(consolidation_candidate.delete().where(
                    by_keys([c.closed_id, c.seq], keys[i: i + self.chunk])))).rowcount or 0)
                if done:
                    await record(conn, {consolidation_candidate.name: done})
            n += done
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
