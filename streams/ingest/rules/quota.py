"""The quota of chat events into ingest, per tenant: which events count, and what
becomes of one over it. Pure.

An event counts once, where it is first read: on the chat topic. What ingest
re-keys there (sub-agent chat for its parent, an event for its conversation's
home partition) counts there and not again on the re-key topic; idle checks and
erasure fences are memstream's own and never count; an event an erasure covers
is skipped before it is weighed, unless its tenant's events are delayed (they
are weighed as they are read, before they are decoded). A dead letter re-driven
to the chat topic is read there again, and counts again.

An event over its tenant's quota is delayed (held back and taken in later, in
order: :mod:`streams.ingest.pacing`) or, when its tenant asks, dead-lettered
(reason ``over_quota``, the message naming the quota and when it has room
again) and never stored: its conversation's other events are stored as they
come, in order among themselves. A batch read again after a worker's death is
weighed again, so an event dead-lettered the first time may be stored the
second (or the reverse); it is stored at most once either way (the store is
idempotent on the event id), and re-driving its dead letter then stores nothing
twice.
"""

from __future__ import annotations

from streams.wire.rejections import OVER_QUOTA, Rejected


def counts(topic: str, *, chat_topic: str) -> bool:
    """Whether a chat event read on ``topic`` counts against its tenant's quota."""
    return topic == chat_topic


def over_quota(message: str) -> Rejected:
    """The rejection of an event over its tenant's quota; ``message`` says which
    quota, and when it has room again."""
    return Rejected(OVER_QUOTA, "OverQuota", message)
