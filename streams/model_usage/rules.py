"""Pure rules of model usage: bounded labels, prices, the day a call counts for."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

OTHER = "other"
"""The label value of every tenant and agent the settings do not name."""

DAY_S = 86_400
HOUR_S = 3_600


@dataclass(frozen=True)
class LabelPolicy:
    """Which tenants and agents get their own label value. An agent is labelled only
    within a labelled tenant, so the series are at most ``len(tenants) *
    (len(agents) + 1) + 1`` per model and purpose whatever the traffic."""

    tenants: frozenset[str] = frozenset()
    agents: frozenset[str] = frozenset()

    @classmethod
    def of(cls, tenants: Iterable[str], agents: Iterable[str]) -> LabelPolicy:
        return cls(frozenset(tenants), frozenset(agents))

    def labels(self, tenant_id: str, agent_id: str) -> tuple[str, str]:
        """``(tenant, agent)`` label values of a caller."""
        if tenant_id not in self.tenants:
            return OTHER, OTHER
        return tenant_id, agent_id if agent_id in self.agents else OTHER

    def tenant(self, tenant_id: str) -> str:
        return tenant_id if tenant_id in self.tenants else OTHER


@dataclass(frozen=True)
class Price:
    """Price per 1,000 input and per 1,000 output tokens."""

    input_per_1k: float
    output_per_1k: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_1k + output_tokens * self.output_per_1k) / 1000


def cost_of(prices: Mapping[str, Price], model: str, input_tokens: int,
            output_tokens: int) -> float:
    """What the tokens of ``model`` cost by the table; 0 for a model it does not list."""
    price = prices.get(model)
    return price.cost(input_tokens, output_tokens) if price is not None else 0.0


def budget_of(tenant_id: str, default: int, overrides: Mapping[str, int]) -> int:
    """The tenant's daily token budget; 0 means none."""
    return overrides.get(tenant_id, default)


def over_budget(spent: int, budget: int) -> bool:
    """Whether a tenant that took ``spent`` tokens today may call no model any more."""
    return budget > 0 and spent >= budget


def day_of(now: float) -> int:
    """The UTC day (days since the epoch) a moment belongs to."""
    return int(now // DAY_S)


def hour_of(now: float) -> int:
    """The UTC hour (hours since the epoch) a moment belongs to."""
    return int(now // HOUR_S)


CHAT_FRAME_TOKENS = 3
"""Tokens the chat format adds per message, and once more for the reply (OpenAI's
counting of chat prompts), when the API reports no usage and tokens are counted."""


def chat_prompt_tokens(contents: Iterable[tuple[int, int]]) -> int:
    """Counted prompt tokens of a chat request from each message's (role tokens,
    content tokens)."""
    return sum(CHAT_FRAME_TOKENS + r + c for r, c in contents) + CHAT_FRAME_TOKENS
