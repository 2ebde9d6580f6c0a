"""A session consolidated in bounded parts: how much one part takes, and its name.

One run claims at most ``max_messages`` of a session's messages and at most
``max_bytes`` of their text (:func:`take`); a session holding more is
consolidated in parts, each its own run with its own ``closed_id``
(:func:`part_id`): part 1 keeps the closing event's id, part ``n`` appends
``+n``. Part ``n + 1`` is claimed only after part ``n`` finished, and takes
the session's messages after the last one part ``n`` took, so every part is
exactly as resumable and idempotent as a whole session's run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

PART_SEP = "+"


@dataclass(frozen=True)
class PartBound:
    """What one run may claim: messages, and bytes of their text."""

    max_messages: int
    max_bytes: int

    def __post_init__(self) -> None:
        if self.max_messages < 1 or self.max_bytes < 1:
            raise ValueError("a part takes at least one message and one byte")


def take(sizes: Sequence[int], max_messages: int, max_bytes: int, *,
         at_least_one: bool = True) -> int:
    """How many of the next messages (their text sizes, in order) fit in what is
    left of a part (``max_messages`` messages, ``max_bytes`` bytes): the longest
    prefix within both. ``at_least_one``: a first message larger than
    ``max_bytes`` is taken alone, so a part always moves on."""
    used = 0
    for n, size in enumerate(sizes[:max(max_messages, 0)]):
        if used + size > max_bytes:
            return 1 if n == 0 and at_least_one else n
        used += size
    return min(len(sizes), max(max_messages, 0))


def part_id(first_id: str, part: int) -> str:
    """The ``closed_id`` of part ``part`` of the session whose part 1 is ``first_id``."""
    if part < 1:
        raise ValueError("parts are numbered from 1")
    return first_id if part == 1 else f"{first_id}{PART_SEP}{part}"


def first_id(closed_id: str, part: int) -> str:
    """The ``closed_id`` of part 1, from that of part ``part``."""
    if part == 1:
        return closed_id
    suffix = f"{PART_SEP}{part}"
    if not closed_id.endswith(suffix):
        raise ValueError(f"{closed_id!r} is not part {part} of a session")
    return closed_id[:-len(suffix)]


def previous_id(closed_id: str, part: int) -> str | None:
    """The ``closed_id`` of the part before ``part`` (None for part 1)."""
    return None if part == 1 else part_id(first_id(closed_id, part), part - 1)


def next_id(closed_id: str, part: int) -> str:
    """The ``closed_id`` of the part after ``part``."""
    return part_id(first_id(closed_id, part), part + 1)
