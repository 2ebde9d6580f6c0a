"""What the query stage knows of a request besides its record: plain data."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Claim:
    """What is known of a request before it is answered."""

    answered: bool  # its answer was recorded: not to be answered again
    # when an earlier attempt began (epoch ms) that recorded no answer: its reply
    # may have gone out all the same
    began_ms: int | None = None
