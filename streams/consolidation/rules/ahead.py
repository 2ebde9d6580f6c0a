"""Conflict decisions made before the cube's lock, and whether they still hold in it.

A cube's conflict decision may ask a model, and no cube lock is held across a
model call: the decisions are made first, outside the lock, on what the
provider's search found then (:class:`Ahead`: per candidate, the stored
memories it was decided against). Inside the lock the same searches run again;
the decisions are used only when they cover exactly the candidates left to
decide and each found the same memories (:func:`still_holds`). Otherwise
another run wrote or expired one of them meanwhile and the cube is decided
again — outside the lock, a bounded number of times, then by the rules inside
it (:func:`rounds_left`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from streams.consolidation.rules.conflicts import Decision
from streams.memory.model import StoredMemory


def seen(existing: Sequence[Sequence[StoredMemory]]) -> tuple[frozenset[str], ...]:
    """The ids each candidate was decided against."""
    return tuple(frozenset(m.id for m in found) for found in existing)


@dataclass(frozen=True)
class Ahead:
    """Decisions made outside the lock: for the candidates ``seqs``, in order, having
    found the memories ``against``; ``model_calls`` it took."""

    seqs: tuple[int, ...]
    decisions: tuple[Decision, ...]
    against: tuple[frozenset[str], ...]
    model_calls: int = 0


def still_holds(ahead: Ahead | None, seqs: Sequence[int],
                existing: Sequence[Sequence[StoredMemory]]) -> bool:
    """Whether ``ahead`` decided exactly the candidates ``seqs`` against the memories
    the search finds now (``existing``, per candidate)."""
    return (ahead is not None and ahead.seqs == tuple(seqs)
            and ahead.against == seen(existing))


def rounds_left(round_: int, model_rounds: int, has_model: bool) -> bool:
    """Whether round ``round_`` (from 0) decides outside the lock: with a model,
    the first ``model_rounds``; the next decides by the rules inside the lock
    (without a model, every round does: the rules ask nothing but the search)."""
    return has_model and round_ < model_rounds
