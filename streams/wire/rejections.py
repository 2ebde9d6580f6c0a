"""Why a record was refused: one reason from a small, fixed set.

The reasons are metric labels (``memstream_dead_letters_total{reason}``) and
the ``memstream.error.reason`` header of a dead letter, so the set stays small
and every one is documented in ``docs/events.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

UNDECODABLE: Final = "undecodable"
"""Not UTF-8, not JSON (``NaN`` and ``Infinity`` included), or not a JSON object."""
TOO_DEEP: Final = "too_deep"
"""JSON nested deeper than the decoder's limit."""
INVALID_TEXT: Final = "invalid_text"
"""A string holding a lone UTF-16 surrogate: no database or cache can store it."""
MISSING_TENANT: Final = "missing_tenant"
UNKNOWN_TYPE: Final = "unknown_type"
TOO_LARGE: Final = "too_large"
"""``content`` over the configured limit, or ``tool_calls`` over their column."""
OUT_OF_RANGE: Final = "out_of_range"
"""A date-time that cannot be represented in UTC, or outside 1000-01-01 to 9999-12-31."""
BAD_TIME: Final = "bad_time"
"""``created_at`` in no form memstream reads (see ``streams.wire.records.TIME_FORMS``)."""
BAD_ID: Final = "bad_id"
"""A user, agent or conversation id beginning or ending with whitespace."""
SCHEMA: Final = "schema"
UNSTORABLE: Final = "unstorable"
"""The database refused the row for good (only its own row: the rest of its batch was stored)."""
OVER_QUOTA: Final = "over_quota"
"""An event over its tenant's quota of events into ingest (``quotas.events_per_s``)."""

REASONS: Final = (
    UNDECODABLE, TOO_DEEP, INVALID_TEXT, MISSING_TENANT, UNKNOWN_TYPE, TOO_LARGE, OUT_OF_RANGE,
    BAD_TIME, BAD_ID, SCHEMA, UNSTORABLE, OVER_QUOTA,
)


@dataclass(frozen=True, slots=True)
class Rejected:
    """A refused record: the reason, the error class and a short message."""

    reason: str
    error_class: str
    message: str
