"""Storing what holding a memory needs for memories written before it was stored.

Memories written before migration 0022, or by a release of an older
:data:`~.row_features.FEATURES_VERSION`, have no features this release can
read: every worker that loads their scope derives them from the text again
(:func:`~.row_features.features_of`), at every load. :func:`backfill_features`
derives and stores them once, for every valid memory, in batches by id:

- safe beside running workers: a memory's text never changes once written, so
  what is stored equals what a reader derives; the update of a row is
  conditional on the value it read (a concurrent writer's value is kept), an
  erased row is simply not there, and no scope's version moves (a held state
  is already what the stored value decodes to);
- a value of a newer release (a higher version), or of this version written by
  a Python of a newer Unicode version (the workers' own, when the backfill runs
  under an older Python), is left as it is: missing, unreadable and older values
  (an older release's, an older Python's) are replaced;
- resumable: each batch is committed, and ``after`` starts past an id (the
  progress reports the last one done);
- bounded: one batch of rows in memory at a time; the derivation runs in a
  thread so the caller's loop is not held.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Update, and_, bindparam, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.schema.conversation import exact_collation
from streams.adapters.db.schema.memory import memory
from streams.memory.providers.builtin.row_features import (
    FEATURES_VERSION,
    UNICODE,
    decode,
    derive,
    encode,
)
from streams.memory.providers.builtin.rows import DbRow

BATCH = 500


@dataclass
class BackfillProgress:
    """Where a backfill is: valid memories checked, values stored, values left (a
    newer release's or a newer Python's), the last id done and the highest id when it
    began."""

    checked: int = 0
    stored: int = 0
    left: int = 0
    last_id: int = 0
    max_id: int = 0


async def backfill_features(engine: AsyncEngine, *, batch: int = BATCH, after: int = 0,
                            progress: Callable[[BackfillProgress], None] | None = None,
                            ) -> BackfillProgress:
    """Store the features of every valid memory with an id above ``after`` that has
    none this release reads; the totals. ``progress`` is called after each batch."""
    if batch < 1:
        raise ValueError("batch must be at least 1")
    m = memory.c
    async with engine.connect() as conn:
        top = (await conn.execute(select(func.max(m.id)))).scalar_one_or_none()
    done = BackfillProgress(last_id=after, max_id=int(top or 0))
    while done.last_id < done.max_id:
        async with engine.begin() as conn:
            rows = (await conn.execute(
                select(m.id, m.content, m.role, m.features)
                .where(m.id > done.last_id, m.id <= done.max_id, m.valid_to.is_(None))
                .order_by(m.id).limit(batch))).all()
            if not rows:
                done.last_id = done.max_id
                break
            values, left = await asyncio.to_thread(_values, rows)
            stored = 0
            if values:
                stored = (await conn.execute(_store(engine), values)).rowcount
        done.checked += len(rows)
        done.stored += max(stored, 0)
        done.left += left
        done.last_id = int(rows[-1].id)
        if progress is not None:
            progress(done)
    return done


def _store(engine: AsyncEngine) -> Update:
    """Each row's new value, where the value read is still there (compared byte for
    byte: MySQL's default collation would take a value differing in case or trailing
    spaces for the one read). The engine has connected (its server is known)."""
    m = memory.c
    stored: ColumnElement[Any] = m.features
    if engine.dialect.name in ("mysql", "mariadb"):
        stored = m.features.collate(exact_collation(engine.dialect))
    old = bindparam("b_old", type_=m.features.type)
    return (update(memory)
            .where(m.id == bindparam("b_id"),
                   or_(and_(old.is_(None), m.features.is_(None)), stored == old))
            .values(features=bindparam("b_new", type_=m.features.type)))


def _values(rows: Sequence[DbRow]) -> tuple[list[dict[str, object]], int]:
    """The updates for ``rows`` (``b_id``, ``b_old``, ``b_new``) and how many hold a
    value left as it is."""
    out: list[dict[str, object]] = []
    left = 0
    for r in rows:
        if decode(r.features) is not None:
            continue
        if _left(r.features):
            left += 1
            continue
        out.append({"b_id": int(r.id), "b_old": r.features,
                    "b_new": encode(derive(r.content, r.role))})
    return out, left


def _left(stored: object) -> bool:
    """Whether ``stored`` is a value of a release with a higher features version, or of
    this version under a newer Unicode version (a newer Python's)."""
    if not isinstance(stored, str) or not stored:
        return False
    try:
        d = json.loads(stored)
        version = d.get("v")
        newer_unicode = _unicode(d.get("u")) > _unicode(UNICODE)
    except Exception:  # anything stored: unreadable, replaced
        return False
    return type(version) is int and (version > FEATURES_VERSION or (
        version == FEATURES_VERSION and newer_unicode))


def _unicode(version: object) -> tuple[int, ...]:
    """``"15.0.0"`` as ``(15, 0, 0)``; ``()`` (older than any) when it is not one."""
    if not isinstance(version, str) or not re.fullmatch(r"\d{1,4}(\.\d{1,4}){0,3}", version):
        return ()
    return tuple(int(p) for p in version.split("."))
