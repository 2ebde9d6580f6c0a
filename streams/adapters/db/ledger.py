"""The durable ledger of processed messages (MySQL, not Redis).

A message is identified by a content hash: tenant, conversation, role, speaker,
``created_at`` and text (:func:`message_hash`). The same message published
twice under two event ids is one message; a user saying "yes" twice is two.

:meth:`LedgerStore.claim_run` claims a closing event's messages and creates its
run (:mod:`streams.adapters.db.runs`) in one transaction, before the judge.
:meth:`LedgerStore.claim`, inside it, locks the conversation's progress row
(``SELECT ... FOR UPDATE``, so two claims of one conversation never interleave,
even across workers), reads the messages stamped with the closing session's number (every message is
stamped at ingest with the session it belongs to, so a session takes exactly
its own messages, whenever they were stored), and records the hashes not yet
in the ledger under the claiming ``closed_id``. Messages stored before
sessions were stamped are claimed by the earlier rule: those above the
conversation's ``claimed_until_id`` mark up to the session's last message
(``until_event_id``) or stored no later than ``bound``; the mark moves past
them.

A claim is bounded: it takes the session's messages in id order, at most
``MEMSTREAM_CONSOLIDATION__MAX_MESSAGES`` of them and ``__MAX_BYTES`` of text
(their sizes are read first, then only the rows taken). A session holding more
is consolidated in parts (:mod:`streams.consolidation.rules.parts`): the run
records the last message its claim went through and whether the session has
more, and the next part's claim, under the same lock, takes the messages after
it, once.

What a closing event (or a part of one) owns is then exactly the ledger rows
with its ``closed_id`` (:meth:`LedgerStore.claimed_messages`): a redelivered or
retried event finds them again; any other closing event (a repeated session
end, the topic replayed from offset 0) finds them taken. Ledger rows are purged
after the retention, except those of unfinished runs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from streams.adapters.db.engine import insert_ignoring_duplicates
from streams.adapters.db.runs import run_values
from streams.adapters.db.schema.consolidation import (
    consolidation_ledger,
    consolidation_progress,
    consolidation_run,
)
from streams.adapters.db.schema.conversation import conversation_message
from streams.clock import aware_utc, naive_utc
from streams.consolidation.model import Claim, Run, SessionMessage
from streams.consolidation.rules.parts import PartBound, take

_IN_CHUNK = 500


def message_hash(tenant_id: str, conversation_id: str, role: str, name: str | None,
                 content: str, created_at: datetime) -> str:
    when = naive_utc(created_at)
    parts = (tenant_id, conversation_id, role, name or "", when.isoformat(), content)
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


def session_message(row: Any) -> SessionMessage:
    return SessionMessage(int(row.id), row.event_id, row.role, row.content,
                          aware_utc(row.created_at), row.name, row.user_id)


@dataclass(frozen=True)
class _Page:
    """Messages one claim takes of a kind (stamped, late or unstamped): the rows, the
    bytes of their text, and whether more of that kind follow."""

    rows: list[Any] = field(default_factory=list)
    used: int = 0
    more: bool = False


_m = conversation_message.c
MESSAGE_COLUMNS = (_m.id, _m.event_id, _m.role, _m.name, _m.content, _m.created_at,
                    _m.user_id)


class LedgerStore:
    """The live ledger (the ``Ledger`` port of :mod:`streams.consolidation.ports`)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._progress_row = insert_ignoring_duplicates(
            engine, consolidation_progress, ["tenant_id", "conversation_id"])
        self._ledger_row = insert_ignoring_duplicates(
            engine, consolidation_ledger, ["tenant_id", "message_hash"])
        self._run_row = insert_ignoring_duplicates(engine, consolidation_run, ["closed_id"])

    async def claim_run(self, run: Run, *, session_seq: int, bound: datetime, size: PartBound,
                        now: datetime, until_event_id: str | None = None,
                        late_since: datetime | None = None, previous: str | None = None) -> None:
        """Claim the closing event's messages (:meth:`claim`; ``now`` aware, the
        others naive UTC) and create ``run`` with what was claimed, in one
        transaction; a run that exists already is kept as it is."""
        async with self.engine.begin() as conn:
            claimed = await self.claim(
                conn, tenant_id=run.tenant_id, conversation_id=run.conversation_id,
                closed_id=run.closed_id, session_seq=session_seq, bound=bound, size=size,
                late_since=late_since, now=naive_utc(now), until_event_id=until_event_id,
                previous=previous)
            await conn.execute(self._run_row, run_values(replace(
                run, message_count=claimed.count, until_id=claimed.until_id,
                more=claimed.more), now))

    async def claim(self, conn: AsyncConnection, *, tenant_id: str, conversation_id: str,
                    closed_id: str, session_seq: int, bound: datetime, size: PartBound,
                    now: datetime, until_event_id: str | None = None,
                    late_since: datetime | None = None, previous: str | None = None) -> Claim:
        """Claim the messages of session ``session_seq`` (stamped with it at ingest,
        whenever they were stored) for ``closed_id``, in id order, at most
        ``size``; the claim says how many were recorded now, where it stopped and
        whether the session has more. Runs in ``conn``'s transaction, which the
        caller commits. A session at or below the conversation's highest claimed
        session claims nothing (its end was consolidated before, and its ledger
        rows may be purged), unless ``late_since`` is given: a late closing event
        claims the session's messages stored since then that no run claimed.

        ``previous`` names the run of the part before: this part takes the
        session's messages after the last one that run went through, and
        nothing unless that run said the session had more (a part is claimed
        once, also after the runs before it were purged).

        Messages stored before sessions were stamped (``session_seq`` NULL) are
        claimed as they were then, within what is left of ``size``: those above
        the conversation's mark, up to the one with ``until_event_id`` or else
        stored up to ``bound`` (naive UTC); the mark moves past them."""
        p = consolidation_progress.c
        where = (p.tenant_id == tenant_id, p.conversation_id == conversation_id)
        await conn.execute(self._progress_row, {
            "tenant_id": tenant_id, "conversation_id": conversation_id,
            "claimed_until_id": 0, "claimed_session_seq": 0, "updated_at": now})
        mark, claimed_seq = (await conn.execute(
            select(p.claimed_until_id, p.claimed_session_seq).where(*where)
            .with_for_update())).one()
        after = None
        if previous is not None:
            r = consolidation_run.c
            before = (await conn.execute(select(r.claimed_until_id, r.has_more).where(
                r.closed_id == previous))).first()
            if before is None or not before.has_more:
                return Claim(0)
            after = int(before.claimed_until_id or 0)
        conv = (_m.tenant_id == tenant_id, _m.conversation_id == conversation_id)
        stamped, legacy = _Page(), _Page()
        if late_since is not None:
            stamped = await self._late(conn, tenant_id, conversation_id, session_seq, late_since,
                                       after or 0, size)
        else:
            if after is not None or session_seq > claimed_seq:
                stamped = await self._page(
                    conn, (*conv, _m.session_seq == session_seq, _m.id > (after or 0)),
                    size.max_messages, size.max_bytes)
            if not stamped.more:
                legacy = await self._legacy(
                    conn, conv, mark, bound, size.max_messages - len(stamped.rows),
                    size.max_bytes - stamped.used, until_event_id, first=not stamped.rows)
        moved: dict[str, Any] = {}
        if legacy.rows:
            moved["claimed_until_id"] = int(legacy.rows[-1].id)
        if session_seq > claimed_seq and late_since is None and previous is None:
            moved["claimed_session_seq"] = session_seq
        if moved:
            await conn.execute(update(consolidation_progress).where(*where).values(
                **moved, updated_at=now))
        until = int(stamped.rows[-1].id) if stamped.rows else after
        more = stamped.more or legacy.more
        by_hash: dict[str, Any] = {}
        for m in sorted([*stamped.rows, *legacy.rows], key=lambda m: int(m.id)):
            h = message_hash(tenant_id, conversation_id, m.role, m.name, m.content, m.created_at)
            by_hash.setdefault(h, m)
        if not by_hash:
            return Claim(0, until, more)
        taken = await self._existing(conn, tenant_id, list(by_hash))
        fresh = [
            {"tenant_id": tenant_id, "message_hash": h, "conversation_id": conversation_id,
             "event_id": m.event_id, "message_id": m.id, "closed_id": closed_id,
             "claimed_at": now}
            for h, m in by_hash.items() if h not in taken
        ]
        if fresh:
            await conn.execute(self._ledger_row, fresh)
        return Claim(len(fresh), until, more)

    async def _page(self, conn: AsyncConnection, where: Sequence[Any], max_messages: int,
                    max_bytes: int, *, first: bool = True,
                    bound: datetime | None = None) -> _Page:
        """The first messages matching ``where``, by id, that fit in ``max_messages``
        and ``max_bytes`` (:func:`~streams.consolidation.rules.parts.take`; ``first``:
        at least one): their sizes are read first, then only the rows taken.
        ``bound``: the messages stored after it are not taken, nor those after them."""
        sized = (await conn.execute(
            select(_m.id, func.length(_m.content).label("size"), _m.ingested_at)
            .where(*where).order_by(_m.id).limit(max(max_messages, 0) + 1))).all()
        if bound is not None:
            cut = next((i for i, r in enumerate(sized) if r.ingested_at > bound), len(sized))
            sized = sized[:cut]
        n = take([int(r.size or 0) for r in sized], max_messages, max_bytes, at_least_one=first)
        if n == 0:
            return _Page([], 0, bool(sized))
        rows = list((await conn.execute(
            select(*MESSAGE_COLUMNS)
            .where(*where, _m.id >= sized[0].id, _m.id <= sized[n - 1].id)
            .order_by(_m.id))).all())
        return _Page(rows, sum(int(r.size or 0) for r in sized[:n]), n < len(sized))

    async def _late(self, conn: AsyncConnection, tenant_id: str, conversation_id: str,
                    session_seq: int, since: datetime, after: int, size: PartBound) -> _Page:
        """Messages of session ``session_seq`` stored since ``since`` that no run
        claimed (a late closing event's share), after message ``after``, at most
        ``size``."""
        l = consolidation_ledger.c  # noqa: E741
        taken = select(l.message_id).where(l.tenant_id == tenant_id,
                                            l.conversation_id == conversation_id)
        return await self._page(conn, (
            _m.tenant_id == tenant_id, _m.conversation_id == conversation_id,
            _m.session_seq == session_seq, _m.ingested_at >= since, _m.id > after,
            _m.id.not_in(taken)), size.max_messages, size.max_bytes)

    async def _legacy(self, conn: AsyncConnection, conv: tuple[Any, ...], mark: int,
                      bound: datetime, max_messages: int, max_bytes: int,
                      until_event_id: str | None, *, first: bool) -> _Page:
        """Unstamped messages above ``mark`` that a claim takes (see :meth:`claim`): a
        prefix by id, so everything up to the new mark is claimed."""
        last = None if until_event_id is None else (await conn.execute(
            select(_m.id).where(*conv, _m.event_id == until_event_id))).scalar()
        return await self._page(
            conn, (*conv, _m.session_seq.is_(None), _m.id > mark,
                   *(() if last is None else (_m.id <= last,))),
            max_messages, max_bytes, first=first, bound=bound if last is None else None)

    async def _existing(self, conn: AsyncConnection, tenant_id: str,
                        hashes: Sequence[str]) -> set[str]:
        l = consolidation_ledger.c  # noqa: E741
        found: set[str] = set()
        for i in range(0, len(hashes), _IN_CHUNK):
            chunk = hashes[i:i + _IN_CHUNK]
            rows = await conn.execute(select(l.message_hash).where(
                l.tenant_id == tenant_id, l.message_hash.in_(chunk)))
            found.update(r.message_hash for r in rows)
        return found

    async def other_speaker(self, tenant_id: str, conversation_id: str,
                            user_id: str) -> str | None:
        """A user other than ``user_id`` with messages in the conversation, if any."""
        m = conversation_message.c
        async with self.engine.connect() as conn:
            other = (await conn.execute(select(m.user_id).where(
                m.tenant_id == tenant_id, m.conversation_id == conversation_id,
                m.user_id != user_id).order_by(m.id.desc()).limit(1))).scalar()
        return str(other) if other is not None else None

    async def claimed_messages(self, tenant_id: str, closed_id: str) -> list[SessionMessage]:
        """The messages ``closed_id`` claimed, oldest first."""
        l = consolidation_ledger.c  # noqa: E741
        ids = select(l.message_id).where(l.tenant_id == tenant_id, l.closed_id == closed_id)
        q = (select(*MESSAGE_COLUMNS)
             .where(_m.tenant_id == tenant_id, _m.id.in_(ids)).order_by(_m.id))
        async with self.engine.connect() as conn:
            return [session_message(r) for r in (await conn.execute(q)).all()]

    async def context_before(self, tenant_id: str, conversation_id: str, before_id: int,
                             n: int) -> list[SessionMessage]:
        """Up to ``n`` messages of the conversation before ``before_id``, oldest first."""
        if n <= 0:
            return []
        q = (select(*MESSAGE_COLUMNS)
             .where(_m.tenant_id == tenant_id, _m.conversation_id == conversation_id,
                    _m.id < before_id)
             .order_by(_m.id.desc()).limit(n))
        async with self.engine.connect() as conn:
            rows = (await conn.execute(q)).all()
        return [session_message(r) for r in reversed(rows)]

    async def purge(self, cutoff: datetime) -> int:
        """Delete ledger rows claimed before ``cutoff`` (naive UTC), except those of
        runs that are not done; returns how many were deleted."""
        l, r = consolidation_ledger.c, consolidation_run.c  # noqa: E741
        unfinished = select(r.closed_id).where(r.status != "done")
        async with self.engine.begin() as conn:
            result = await conn.execute(delete(consolidation_ledger).where(
                l.claimed_at < cutoff, l.closed_id.not_in(unfinished)))
        return int(result.rowcount or 0)
