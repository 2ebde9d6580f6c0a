"""The Session window screened for sensitive content, when the deployment asks.

Off by default (``sensitive.session_window``): the chat history is the customer's
record, stored and served as said; long-term memory is screened either way. On,
each message (and tool output) a query returns in its Session window goes through
the tenant's and agent's policy (:meth:`~streams.consolidation.screening.
Screening.policy`, the same as consolidation's): a masked kind's spans become
their placeholders, a message holding a kind the policy drops is left out of the
window. What is stored (the database, Redis) is not changed.

A conversation's messages come back in every query of it, so each text's result
is kept per tenant and policy in a bounded cache (``entries``, and ``chars`` of text held in
all): a message is screened once per worker while it stays in the cache, and the
detector's thread sees each message of a busy conversation once. A window read
while the detector is busy waits for it; the query's own deadline bounds that
wait (the reply then says ``short_term_failed``), and the deadline never holds a
slot the detector needs.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import replace
from typing import Any

from streams.consolidation.rules.sensitive.kinds import Kind
from streams.consolidation.rules.sensitive.policy import Policy
from streams.consolidation.screening import Screening
from streams.memory.agent_configs import AgentConfigs
from streams.session.reader import SessionWindow

_Key = tuple[str, tuple[str, ...], bytes]


def _key(tenant_id: str, policy: Policy, text: str) -> _Key:
    """A tenant's text under a policy (a tenant's counts are its own)."""
    return (tenant_id, tuple(policy.action(k).value for k in Kind),
            hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest())


class WindowScreening:
    """Screens Session windows with ``screening``'s policies; ``configs`` give each
    agent's overrides."""

    def __init__(self, screening: Screening, configs: AgentConfigs, *,
                 entries: int = 20_000, chars: int = 16_000_000) -> None:
        self.screening = screening
        self.configs = configs
        self.entries = entries
        self.chars = chars
        self._held = 0
        self._cache: OrderedDict[_Key, str | None] = OrderedDict()

    def _remember(self, key: _Key, result: str | None) -> None:
        self._cache[key] = result
        self._held += len(result or "")
        while self._cache and (len(self._cache) > self.entries or self._held > self.chars):
            _, old = self._cache.popitem(last=False)
            self._held -= len(old or "")

    async def texts(self, tenant_id: str, policy: Policy, texts: list[str]) -> list[str | None]:
        """Each text as the policy leaves it (None: left out), from the cache where held."""
        keys = [_key(tenant_id, policy, t) for t in texts]
        held = {k: self._cache[k] for k in keys if k in self._cache}  # read before any wait
        todo: dict[_Key, str] = {}
        for k, t in zip(keys, texts, strict=True):
            if k not in held:
                todo.setdefault(k, t)
        found: dict[_Key, str | None] = {}
        if todo:
            done = await self.screening.window_texts(tenant_id, list(todo.values()), policy)
            found = dict(zip(todo, done, strict=True))
        for k in held:
            if k in self._cache:
                self._cache.move_to_end(k)
        for k, result in found.items():
            self._remember(k, result)
        return [held[k] if k in held else found[k] for k in keys]

    async def screen(self, tenant_id: str, agent_id: str,
                     window: SessionWindow) -> SessionWindow:
        agent = self.configs.get(tenant_id, agent_id)
        policy = self.screening.policy(tenant_id, agent_id, agent.sensitive if agent else ())
        lists = {name: getattr(window, name) for name in ("messages", "tool")}
        texts = [str(m.get("content") or "") for msgs in lists.values() for m in msgs]
        if not any(texts):
            return window
        results = iter(await self.texts(tenant_id, policy, texts))
        screened: dict[str, list[dict[str, Any]]] = {}
        for name, msgs in lists.items():
            kept = []
            for m in msgs:
                result = next(results)
                if result is None:
                    continue
                kept.append(m if result == (m.get("content") or "") else {**m, "content": result})
            screened[name] = kept
        return replace(window, messages=screened["messages"], tool=screened["tool"])
