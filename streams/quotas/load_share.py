"""Under load, no tenant takes most of a worker from the others.

A worker answers every tenant's queries and does every tenant's background work on
one event loop. While it keeps up, a tenant may ask as much as its quotas allow.
When it does not (its loop lags: a query's steps wait for turns behind other work),
one tenant's flood makes every tenant's queries late. So while the worker is
*loaded* — a lag of the loop of at least ``lag_s`` was seen in the last ``HOLD_S`` —

* a query of a tenant *heavy* in the queries answered lately is refused
  (``over_quota``) without engine work (:meth:`LoadShare.refuses`);
* a consolidation run of a tenant heavy in the messages of the runs begun lately
  waits at its checkpoints (:meth:`LoadShare.yields`, by
  :mod:`streams.worker.foreground`).

A tenant is heavy when, of the work counted lately (each piece with a weight that
halves every ``HALF_LIFE_S``), it had at least ``LEAST_QUERIES`` (``LEAST_MESSAGES``
of runs) and more than ``MORE_THAN_OTHERS`` times what every other tenant had
together, another tenant having had some; alone, or asking about as much as the
others, nobody is heavy. Refused queries are not counted, so under load a heavy
tenant is still answered, about three times as often as all the others together at
most, not nothing. A weight halving every 10 s smooths bursts: two tenants asking
as much as each other in turns are not heavy.

The pure rules (:func:`decayed`, :func:`heavy`) take the time and counts as
arguments; :class:`Shares` holds the counts of at most ``max_tenants`` tenants (the
least recently counted forgotten first) and their total, so a decision costs the
same with many tenants.
"""

from __future__ import annotations

import math
from collections import OrderedDict

HALF_LIFE_S = 10.0
HOLD_S = 1.0
ANOTHER = 0.5  # what the other tenants had together, at least, to be protected
MORE_THAN_OTHERS = 3.0
# the least a heavy tenant had (weighted): fewer are noise, a worker that just started
# having answered a handful of queries, unevenly
LEAST_QUERIES = 10.0
LEAST_MESSAGES = 500.0


def decayed(value: float, since_s: float, half_life_s: float = HALF_LIFE_S) -> float:
    """``value`` after ``since_s`` seconds of halving every ``half_life_s`` (a time
    going back changes nothing)."""
    if since_s <= 0:
        return value
    return value * math.pow(0.5, since_s / half_life_s)


def heavy(mine: float, total: float, least: float = ANOTHER) -> bool:
    """Whether a tenant with the weighted count ``mine`` of ``total`` is heavy: at
    least ``least``, and more than ``MORE_THAN_OTHERS`` times what the others had
    together, which is at least ``ANOTHER``."""
    others = total - mine
    return others >= ANOTHER and mine >= least and mine > MORE_THAN_OTHERS * others


class Shares:
    """What each tenant had of one kind of work lately (weights that halve every
    ``half_life_s``), of at most ``max_tenants`` tenants (the least recently counted
    forgotten first)."""

    def __init__(self, *, max_tenants: int = 10_000, half_life_s: float = HALF_LIFE_S,
                 least: float = ANOTHER) -> None:
        self.max_tenants = max_tenants
        self.half_life_s = half_life_s
        self.least = least
        self._counts: OrderedDict[str, tuple[float, float]] = OrderedDict()  # (count, at)
        self._total = (0.0, 0.0)  # every tenant's count, and when

    def add(self, tenant: str, now: float, weight: float = 1.0) -> None:
        """Work of ``tenant`` done at ``now``, of ``weight`` (a time before the last one
        counted is taken as that one: the weights never move back in time)."""
        _, at = self._counts.get(tenant, (0.0, now))
        self._counts[tenant] = (self.count(tenant, now) + weight, max(now, at))
        self._counts.move_to_end(tenant)
        self._total = (self.total(now) + weight, max(now, self._total[1]))
        while len(self._counts) > self.max_tenants:
            self._counts.popitem(last=False)

    def count(self, tenant: str, now: float) -> float:
        """The tenant's weighted count at ``now``."""
        count, at = self._counts.get(tenant, (0.0, now))
        return decayed(count, now - at, self.half_life_s)

    def total(self, now: float) -> float:
        """Every tenant's weighted count (the forgotten tenants' too, as they decay)."""
        return decayed(self._total[0], now - self._total[1], self.half_life_s)

    def heavy(self, tenant: str, now: float) -> bool:
        return heavy(self.count(tenant, now), self.total(now), self.least)


class LoadShare:
    """Whether the worker is loaded, and each tenant's share of its queries answered
    (``queries``) and of its background work (``background``: the messages of the
    consolidation runs begun).
    ``lag_s`` 0 turns it off: the worker is never loaded."""

    def __init__(self, lag_s: float, *, max_tenants: int = 10_000,
                 hold_s: float = HOLD_S) -> None:
        self.lag_s = lag_s
        self.hold_s = hold_s
        self.queries = Shares(max_tenants=max_tenants, least=LEAST_QUERIES)
        self.background = Shares(max_tenants=max_tenants, least=LEAST_MESSAGES)
        self._loaded_until = -math.inf

    def note_lag(self, lag_s: float, now: float) -> None:
        """A lag of the event loop measured at ``now``."""
        if self.lag_s > 0 and lag_s >= self.lag_s:
            self._loaded_until = now + self.hold_s

    def loaded(self, now: float) -> bool:
        return now < self._loaded_until

    def answered(self, tenant: str, now: float) -> None:
        """A query of ``tenant`` is answered here."""
        self.queries.add(tenant, now)

    def refuses(self, tenant: str, now: float) -> bool:
        """Whether a query of ``tenant`` is refused now: the worker loaded, the tenant
        heavy in its queries."""
        return self.loaded(now) and self.queries.heavy(tenant, now)

    def yields(self, tenant: str, now: float) -> bool:
        """Whether background work of ``tenant`` waits now: the worker loaded, the
        tenant heavy in its background work."""
        return self.loaded(now) and self.background.heavy(tenant, now)

    def message(self, tenant: str) -> str:
        return (f"this worker is loaded and tenant {tenant!r} had most of the queries it "
                f"answered lately: retry in {self.hold_s:g} s")
