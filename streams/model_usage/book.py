"""This worker's model usage per tenant, agent and UTC hour, bounded, for
``GET /stats/model-usage`` and the tenants' daily budgets.

The book keeps ``max_tenants`` tenants (the least recently seen are forgotten),
``max_agents`` agents per tenant (the others are summed as ``other``) and the
last ``keep_hours`` hours: at most ``max_tenants`` x ``max_agents`` x
``keep_hours`` entries, and each call's work does not grow with them (old hours
are pruned once an hour). A tenant's tokens of the day are kept apart from that
(one number per tenant, ``max_day_tenants`` of them): forgetting a tenant's hours
never resets its daily budget. It is the usage of this worker since it started;
Prometheus (``memstream_model_*``) sums the workers and keeps the history.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from streams.model_usage.rules import HOUR_S, OTHER, day_of, hour_of

MAX_AGENTS = 1000


@dataclass
class Totals:
    """Usage summed over calls."""

    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    failures: int = 0
    cost: float = 0.0

    def add(self, other: Totals) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.calls += other.calls
        self.failures += other.failures
        self.cost += other.cost

    def view(self) -> dict[str, Any]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "tokens": self.input_tokens + self.output_tokens, "calls": self.calls,
                "failures": self.failures, "cost": round(self.cost, 6)}


@dataclass
class _Tenant:
    hours: dict[tuple[str, int], Totals] = field(default_factory=dict)  # (agent, hour)
    agents: set[str] = field(default_factory=set)
    newest_hour: int = -1


def _iso_hour(hour: int) -> str:
    return datetime.fromtimestamp(hour * HOUR_S, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class UsageBook:
    def __init__(self, *, max_tenants: int = 10_000, keep_hours: int = 48,
                 max_agents: int = MAX_AGENTS, max_day_tenants: int = 1_000_000) -> None:
        self.max_tenants = max_tenants
        self.keep_hours = keep_hours
        self.max_agents = max_agents
        self.max_day_tenants = max_day_tenants
        self._tenants: OrderedDict[str, _Tenant] = OrderedDict()
        self._day = -1
        self._day_tokens: dict[str, int] = {}  # this UTC day's tokens, by tenant

    def add(self, tenant_id: str, agent_id: str, now: float, usage: Totals) -> None:
        """Count one call's usage for the tenant and agent at ``now``."""
        t = self._tenants.get(tenant_id)
        if t is None:
            t = self._tenants[tenant_id] = _Tenant()
            while len(self._tenants) > self.max_tenants:
                self._tenants.popitem(last=False)
        else:
            self._tenants.move_to_end(tenant_id)
        hour = hour_of(now)
        if agent_id not in t.agents:
            if len(t.agents) >= self.max_agents:
                agent_id = OTHER
            t.agents.add(agent_id)
        t.hours.setdefault((agent_id, hour), Totals()).add(usage)
        if hour > t.newest_hour:  # a new hour: the ones past keep_hours go
            t.newest_hour = hour
            oldest = hour - self.keep_hours + 1
            for key in [k for k in t.hours if k[1] < oldest]:
                del t.hours[key]
            t.agents = {a for a, _ in t.hours}
        day = day_of(now)
        if self._day != day:
            self._day, self._day_tokens = day, {}
        if tenant_id in self._day_tokens or len(self._day_tokens) < self.max_day_tenants:
            self._day_tokens[tenant_id] = (self._day_tokens.get(tenant_id, 0)
                                           + usage.input_tokens + usage.output_tokens)

    def spent_today(self, tenant_id: str, now: float) -> int:
        """Tokens the tenant's calls took on this worker in the UTC day of ``now``."""
        return self._day_tokens.get(tenant_id, 0) if self._day == day_of(now) else 0

    def view(self, tenant_id: str, now: float, *, hours: int, top: int) -> dict[str, Any]:
        """The tenant's usage over the last ``hours`` hours: per hour, its ``top``
        agents by cost then tokens, and the total."""
        t = self._tenants.get(tenant_id) or _Tenant()
        last = hour_of(now)
        first = last - min(hours, self.keep_hours) + 1
        per_hour = {h: Totals() for h in range(first, last + 1)}
        per_agent: dict[str, Totals] = {}
        total = Totals()
        for (agent, hour), usage in t.hours.items():
            if hour < first or hour > last:
                continue
            per_hour[hour].add(usage)
            per_agent.setdefault(agent, Totals()).add(usage)
            total.add(usage)
        ranked = sorted(per_agent.items(), key=lambda kv: (
            -kv[1].cost, -(kv[1].input_tokens + kv[1].output_tokens), kv[0]))
        return {
            "tenant": tenant_id,
            "from": _iso_hour(first), "to": _iso_hour(last + 1),
            "total": total.view(),
            "items": [{"hour": _iso_hour(h), **u.view()} for h, u in sorted(per_hour.items())],
            "top_agents": [{"agent_id": a, **u.view()} for a, u in ranked[:top]],
        }
