"""What a stage may catch from a store behind one of its ports.

Adapters raise these (never a driver's own error) where a stage decides what
to do about an outage; ports document which of them each method raises.
"""

from __future__ import annotations


class StoreUnavailable(Exception):
    """The durable store could not be reached or refused for a passing reason
    (connection lost, timeout, deadlock, a server shutting down): trying again
    later may succeed; nothing was changed by the failed call."""


class StoreRefused(Exception):
    """The durable store refused the call for good (an error no retry can mend);
    the work that needed it fails with a clear status instead of waiting."""


class CacheUnavailable(Exception):
    """The hot copy (Redis) failed, or is being skipped after a recent failure.
    The durable store stays authoritative: a reader falls back to it."""
