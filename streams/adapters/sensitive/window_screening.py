"""The Session window screened for sensitive content, when the deployment asks.

Off by default (``sensitive.session_window``): the chat history is the customer's
record, stored and served as said; long-term memory is screened either way. On,
the messages a query's Session window is built from go through the tenant's and
agent's policy (:meth:`~streams.consolidation.screening.Screening.policy`, the
same as consolidation's) before the window is built — their content, their
speaker's name and their tool calls' arguments: a masked kind's spans become their
placeholders, a message holding a kind the policy drops is left out, and the
window's alternation, token count and truncation then follow what is left. The
conversation's summary is masked as consolidation masks one (never dropped). What
is stored (the database, Redis) is not changed.

A conversation's messages come back in every query of it, so each text's result
is kept per tenant and policy in a bounded cache (``entries``, and ``chars`` of text held in
all): a message is screened once per worker while it stays in the cache, and the
detector's thread sees each message of a busy conversation once. A window read
while the detector is busy waits its turn (a chunk of each other caller's,
``detect_all``); the query's own deadline bounds that wait (the reply then says
``short_term_failed``), and the deadline never holds a slot the detector needs.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any

from streams.consolidation.rules.sensitive.kinds import Kind
from streams.consolidation.rules.sensitive.policy import Policy
from streams.consolidation.screening import Screening, never_dropping
from streams.memory.agent_configs import AgentConfigs
from streams.session.reader import Docs

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

    async def screen(self, tenant_id: str, agent_id: str, docs: Docs,
                     summary: str | None) -> tuple[Docs, str | None]:
        agent = self.configs.get(tenant_id, agent_id)
        policy = self.screening.policy(tenant_id, agent_id, agent.sensitive if agent else ())
        fields = [said for d in docs for said in _said(d)]
        results = iter(await self.texts(tenant_id, policy, [t for _, t in fields]))
        kept: Docs = []
        for d in docs:
            said = _said(d)
            done = [next(results) for _ in said]
            if any(r is None for r in done):
                continue  # a kind the policy drops: the message is left out
            kept.append(d if all(r == t for (_, t), r in zip(said, done, strict=True))
                        else _rewritten(d, said, done))
        if summary:
            (masked,) = await self.texts(tenant_id, never_dropping(policy), [summary])
            summary = summary if masked is None else masked  # never None: nothing drops
        return kept, summary


def _said(doc: dict[str, Any]) -> list[tuple[tuple[str, ...], str]]:
    """Where a message says something (its content, its speaker's name, each tool
    call's arguments) and what, as (path, text)."""
    out: list[tuple[tuple[str, ...], str]] = []
    for key in ("content", "name"):
        if isinstance(doc.get(key), str) and doc[key]:
            out.append(((key,), doc[key]))
    for i, call in enumerate(doc.get("tool_calls") or []):
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("arguments"), str) and fn["arguments"]:
            out.append((("tool_calls", str(i)), fn["arguments"]))
    return out


def _rewritten(doc: dict[str, Any], said: list[tuple[tuple[str, ...], str]],
               done: list[str | None]) -> dict[str, Any]:
    """A copy of ``doc`` with each place that says something replaced by its screened
    text (the stored message is not changed)."""
    out = dict(doc)
    for (path, _), text in zip(said, done, strict=True):
        if path[0] == "tool_calls":
            calls = out["tool_calls"] = list(out["tool_calls"])
            call = calls[int(path[1])] = dict(calls[int(path[1])])
            call["function"] = {**call["function"], "arguments": text}
        else:
            out[path[0]] = text
    return out
