"""Writes of the built-in provider: adding memories and expiring them.

An add stores the memory rows, their postings in the inverted index, their
vectors and the scope's statistics in one transaction, holding the scope's
statistics row locked (``SELECT … FOR UPDATE``) from before the first insert
to the commit. Writes of one scope are therefore serialised, and the ids a
scope's memories get grow in commit order — the scope cache
(:mod:`.scope_cache`) relies on that to read only what was added since it
last looked. An expiry never deletes a memory: it sets ``valid_to`` and
``superseded_by``, deletes the postings and vectors and updates the
statistics. Both bump the scope's version. A memory written again while an
identical one is expired (a rebuild from the history, a write decided again
after its first attempt stopped) is stored anew, valid, under a new id.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from streams.adapters.db.engine import insert_ignoring_duplicates
from streams.adapters.db.schema.memory import (
    TERM_MAX_CHARS,
    masked_column,
    memory,
    memory_embedding,
    memory_scope_stats,
    memory_term,
    role_and_span,
)
from streams.clock import naive_utc
from streams.memory.model import MemoryCandidate
from streams.memory.provider import PermanentProviderError, Scope
from streams.memory.providers.builtin.row_features import derive, encode
from streams.memory.providers.builtin.rows import content_hash, texts_reach


def retired_hash(content_hash: str, memory_id: int) -> str:
    """The hash an expired memory keeps once the same memory is written again."""
    return hashlib.sha256(f"expired\x1f{content_hash}\x1f{memory_id}".encode()).hexdigest()


@dataclass
class Prepared:
    """A candidate with what its rows need: identity, index terms, session slot."""

    candidate: MemoryCandidate
    hash: str
    terms: dict[str, int]  # of the text and the subjects
    doc_len: int
    features: str  # the ``features`` column (:mod:`.row_features`)
    session: str | None = None
    seq: int = 0


PREPARE_OFF_LOOP_CHARS = 16_000  # text of one add analysed in a thread, not on the loop


def prepare_off_loop(memories: Sequence[MemoryCandidate]) -> bool:
    """Whether :func:`prepare` of ``memories`` is work for a thread: it analyses each
    text whole (several passes of regular expressions, about half a microsecond a
    character), which for a chunk of long answers would hold the event loop, and every
    query it answers, for a tenth of a second."""
    return texts_reach((m.content for m in memories), PREPARE_OFF_LOOP_CHARS)


def prepare(memories: Sequence[MemoryCandidate], session_key: str | None, provider: str,
            ) -> list[Prepared]:
    """Episodes of one call form one session unless ``session_key`` names it; facts join
    a session only when ``session_key`` is given."""
    out: list[Prepared] = []
    episodes = [m for m in memories if m.kind == "episode" and m.content.strip()]
    batch_key = session_key
    if batch_key is None and episodes:
        first = episodes[0].source_event_ids[:1] or (episodes[0].content,)
        batch_key = "batch:" + hashlib.sha1(first[0].encode()).hexdigest()[:20]
    for m in memories:
        if not m.content.strip():
            raise PermanentProviderError("empty memory content", provider=provider,
                                         operation="add")
        features = derive(m.content, m.role)
        terms = dict(features.terms)
        for t in m.subjects:
            terms[t[:TERM_MAX_CHARS]] = terms.get(t[:TERM_MAX_CHARS], 0) + 1
        session = batch_key if (m.kind == "episode" or session_key) else None
        out.append(Prepared(m, content_hash(m), terms,
                            sum(features.terms.values()) + len(m.subjects), encode(features),
                            session))
    return out


class Writes:
    """The write transactions of one provider."""

    def __init__(self, engine: AsyncEngine, clock: Callable[[], datetime]) -> None:
        self.engine = engine
        self.clock = clock

    async def ids_by_hash_outside(self, scope: Scope, cube: str, owner: str,
                                  hashes: list[str]) -> dict[str, str]:
        """Ids of the valid memories with ``hashes`` in the scope, read before the
        write transaction."""
        s, m = memory_scope_stats.c, memory.c
        q = (select(m.content_hash, m.id)
             .join(memory_scope_stats, s.id == m.scope_id)
             .where(s.tenant_id == scope.tenant_id, s.cube == cube, s.owner_id == owner,
                    m.content_hash.in_(hashes), m.valid_to.is_(None)))
        async with self.engine.connect() as conn:
            return {r.content_hash: str(r.id) for r in await conn.execute(q)}

    @staticmethod
    async def ids_by_hash(conn: AsyncConnection, scope_id: int, hashes: list[str],
                          ) -> dict[str, str]:
        """Ids of the valid memories with ``hashes``. An expired memory with one of
        them gives its hash up first (it keeps its row, text and ``superseded_by``
        as history), so writing it again stores it anew, valid, under a new id:
        ids keep growing in commit order, which the scope cache relies on."""
        m = memory.c
        rows = (await conn.execute(select(m.content_hash, m.id, m.valid_to).where(
            m.scope_id == scope_id, m.content_hash.in_(hashes)))).all()
        for r in rows:
            if r.valid_to is not None:
                await conn.execute(update(memory).where(m.id == r.id).values(
                    content_hash=retired_hash(r.content_hash, int(r.id))))
        return {r.content_hash: str(r.id) for r in rows if r.valid_to is None}

    async def lock_scope(self, conn: AsyncConnection, scope: Scope, cube: str, owner: str,
                         ) -> int:
        """The scope's id, creating its row; the row stays locked until commit."""
        s = memory_scope_stats.c
        await conn.execute(
            insert_ignoring_duplicates(self.engine, memory_scope_stats,
                                       ["tenant_id", "cube", "owner_id"]),
            {"tenant_id": scope.tenant_id, "cube": cube, "owner_id": owner, "doc_count": 0,
             "total_len": 0, "version": 0, "updated_at": self.clock()})
        q = (select(s.id).where(s.tenant_id == scope.tenant_id, s.cube == cube,
                                s.owner_id == owner).with_for_update())
        return int((await conn.execute(q)).scalar_one())

    async def add(self, scope: Scope, cube: str, owner: str, unique: list[Prepared],
                  vectors: dict[str, bytes], model: tuple[str, int] | None) -> dict[str, str]:
        """Insert what is not stored yet; the stored ids of all of ``unique`` by hash."""
        async with self.engine.begin() as conn:
            scope_id = await self.lock_scope(conn, scope, cube, owner)
            known = await self.ids_by_hash(conn, scope_id, [p.hash for p in unique])
            new = [p for p in unique if p.hash not in known]
            if new:
                known.update(await self._insert(conn, scope, cube, scope_id, new, vectors, model))
        return known

    async def _insert(self, conn: AsyncConnection, scope: Scope, cube: str, scope_id: int,
                      new: list[Prepared], vectors: dict[str, bytes],
                      model: tuple[str, int] | None) -> dict[str, str]:
        m = memory.c
        sessions = sorted({p.session for p in new if p.session is not None})
        next_seq: dict[str, int] = {}
        if sessions:
            q = (select(m.session_key, func.max(m.seq)).where(
                m.scope_id == scope_id, m.session_key.in_(sessions)).group_by(m.session_key))
            next_seq = {r[0]: int(r[1]) + 1 for r in await conn.execute(q)}
        for p in sorted(new, key=lambda p: naive_utc(p.candidate.event_time) or datetime.min):
            if p.session is not None:
                p.seq = next_seq.get(p.session, 0)
                next_seq[p.session] = p.seq + 1
        now = self.clock()
        rows = [{
            "scope_id": scope_id, "tenant_id": scope.tenant_id, "user_id": scope.user_id,
            "agent_id": scope.agent_id, "cube": cube, "type": p.candidate.type,
            "scope": p.candidate.scope, "kind": p.candidate.kind,
            "importance": float(p.candidate.importance), "content": p.candidate.content,
            "source_event_ids": json.dumps(list(p.candidate.source_event_ids)),
            "session_key": p.session, "seq": p.seq, "doc_len": p.doc_len,
            "content_hash": p.hash, "features": p.features,
            "event_time": naive_utc(p.candidate.event_time),
            "valid_from": naive_utc(p.candidate.event_time) or now, "valid_to": None,
            "superseded_by": None, "created_at": now, "updated_at": now,
            **role_and_span(p.candidate), **masked_column(p.candidate),
        } for p in new]
        await conn.execute(memory.insert(), rows)
        ids = await self.ids_by_hash(conn, scope_id, [p.hash for p in new])
        postings = [{"scope_id": scope_id, "term": t, "memory_id": int(ids[p.hash]), "tf": tf,
                     "doc_len": p.doc_len} for p in new for t, tf in p.terms.items()]
        if postings:
            await conn.execute(memory_term.insert(), postings)
        if model is not None:
            name, dim = model
            vecs = [{"scope_id": scope_id, "model": name, "memory_id": int(ids[p.hash]),
                     "dim": dim, "vector": vectors[p.hash]} for p in new if p.hash in vectors]
            if vecs:
                await conn.execute(*self._vector_insert(vecs))
        s = memory_scope_stats.c
        await conn.execute(update(memory_scope_stats).where(s.id == scope_id).values(
            doc_count=s.doc_count + len(new), total_len=s.total_len + sum(p.doc_len for p in new),
            version=s.version + 1, updated_at=now))
        return ids

    def _vector_insert(self, rows: list[dict[str, Any]]) -> tuple[Any, list[dict[str, Any]]]:
        """The INSERT of vector rows. On MySQL the bytes travel as hex and UNHEX() restores
        them: the aiomysql driver cannot bind a bytes parameter with PyMySQL >= 1.2."""
        if self.engine.dialect.name != "mysql":
            return memory_embedding.insert(), rows
        stmt = memory_embedding.insert().values(vector=func.unhex(bindparam("vector_hex")))
        hexed = [{**{k: v for k, v in r.items() if k != "vector"}, "vector_hex": r["vector"].hex()}
                 for r in rows]
        return stmt, hexed

    async def expire(self, scope: Scope, cube: str, owner: str, ids: list[int],
                     superseded_by: str | None) -> None:
        """Retire the valid ones of ``ids`` in the scope; others are ignored. A scope
        with no row (none ever written, or an erasure took its last memory) is left
        without one: an expiry never creates a scope."""
        m, s = memory.c, memory_scope_stats.c
        async with self.engine.begin() as conn:
            scope_id = (await conn.execute(select(s.id).where(
                s.tenant_id == scope.tenant_id, s.cube == cube, s.owner_id == owner)
                .with_for_update())).scalar_one_or_none()
            if scope_id is None:
                return
            q = select(m.id, m.doc_len).where(m.scope_id == scope_id, m.id.in_(ids),
                                              m.valid_to.is_(None))
            live = (await conn.execute(q)).all()
            if not live:
                return
            live_ids = [r.id for r in live]
            now = self.clock()
            await conn.execute(update(memory).where(m.id.in_(live_ids)).values(
                valid_to=now, superseded_by=superseded_by, updated_at=now))
            t, e = memory_term.c, memory_embedding.c
            await conn.execute(memory_term.delete().where(
                t.memory_id.in_(live_ids), t.scope_id == scope_id))
            await conn.execute(memory_embedding.delete().where(
                e.scope_id == scope_id, e.memory_id.in_(live_ids)))
            await conn.execute(update(memory_scope_stats).where(s.id == scope_id).values(
                doc_count=s.doc_count - len(live), version=s.version + 1, updated_at=now,
                total_len=s.total_len - sum(int(r.doc_len) for r in live)))
