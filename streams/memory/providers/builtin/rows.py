"""Shared pieces of the built-in provider: memory identity, row conversion, errors."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable
from typing import Any, Literal, cast

import numpy as np
import numpy.typing as npt
from sqlalchemy.engine import Row
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from streams.clock import aware_utc
from streams.memory.model import MemoryCandidate, StoredMemory
from streams.memory.provider import (
    PermanentProviderError,
    ProviderError,
    RetryableProviderError,
)
from streams.memory.rules.shown_score import shown_score

Vector = npt.NDArray[np.float32]
DbRow = Row[*tuple[Any, ...]]  # a result row of any shape
_RETRYABLE_MYSQL = {1040, 1205, 1213, 2002, 2003, 2006, 2013, 2055}


def texts_reach(texts: Iterable[str], chars: int) -> bool:
    """Whether ``texts`` hold ``chars`` characters or more together (read only as far
    as that): the measure of work that is done in a thread rather than on the loop."""
    total = 0
    for text in texts:
        total += len(text)
        if total >= chars:
            return True
    return False


def content_hash(c: MemoryCandidate) -> str:
    """Identity of a memory: its kind, text and source events."""
    key = "\x1f".join([c.kind, c.content, "\x1e".join(sorted(c.source_event_ids))])
    return hashlib.sha256(key.encode()).hexdigest()


def stored(r: DbRow, score: float) -> StoredMemory:
    """A ``memory`` row as the provider contract's record, with ``score`` (as shown)."""
    return StoredMemory(
        id=str(r.id), content=r.content, cube=r.cube, type=r.type, scope=r.scope,
        score=shown_score(score), importance=float(r.importance),
        event_time=aware_utc(r.event_time),
        source_event_ids=tuple(json.loads(r.source_event_ids or "[]")),
        kind=cast(Literal["fact", "episode"], r.kind if r.kind == "episode" else "fact"),
        metadata={
            "session": r.session_key, "seq": int(r.seq), "user_id": r.user_id,
            "agent_id": r.agent_id,
            "valid_from": aware_utc(r.valid_from).isoformat(),
            "valid_to": aware_utc(r.valid_to).isoformat() if r.valid_to else None,
            "superseded_by": r.superseded_by,
            "created_at": aware_utc(r.created_at).isoformat(),
            "role": r.role,
            "span": (int(r.span_start), int(r.span_end)) if r.span_start is not None
            and r.span_end is not None else None,
            **({"masked": masked.split(",")} if isinstance(masked := getattr(r, "masked", None),
                                                          str) and masked else {}),
        },
    )


def as_provider_error(exc: BaseException, *, provider: str, operation: str) -> ProviderError:
    """Connection loss, timeouts, deadlocks and a busy SQLite are worth retrying; the rest not."""
    retry = isinstance(exc, (OSError, asyncio.TimeoutError, PoolTimeout))
    if isinstance(exc, DBAPIError):
        code = exc.orig.args[0] if exc.orig is not None and exc.orig.args else None
        text = str(exc.orig).lower()
        retry = (exc.connection_invalidated or code in _RETRYABLE_MYSQL
                 or "database is locked" in text or "disk i/o error" in text
                 or "lost connection" in text or "can't connect" in text
                 or isinstance(exc.orig, (OSError, ConnectionError)))
    kind = RetryableProviderError if retry else PermanentProviderError
    return kind(f"{operation} failed: {type(exc).__name__}: {exc}"[:500],
                provider=provider, operation=operation)
