"""Screening: what consolidation is about to store, screened for sensitive content.

Facts and episodes are screened as candidates, before they are saved with the run
(:meth:`.ports.Runs.save_judgement`): a candidate row never holds what the policy
keeps out, and every provider (built-in, MemOS, Mem0) is handed the screened text.
Per kind the tenant's and agent's :class:`~.rules.sensitive.policy.Policy` keeps
the memory as said, masks the spans (typed placeholders, the kinds recorded in
:attr:`~streams.memory.model.MemoryCandidate.masked`) or drops it. A summary is
never dropped (a conversation without one would be summarised again at every
session end): a kind its policy drops is masked in it instead.

The policy is layered: the deployment's (settings, handed in as plain ``{kind:
action}``), then the tenant's (settings, ``tenants``), then the agent's
configuration on the agent-config topic. Each entry of an override is applied on
its own (:func:`~.rules.sensitive.policy.layered`): one naming an unknown kind or
action is not, nor, when agents may only tighten (``agents_may_relax`` off), one
that keeps more than the tenant's policy; a warning names the agent and the
entries not applied, never any text.

Detection runs on the detector's own worker thread (:meth:`.ports.SensitiveDetector.
detect_all`), one batch per run; a policy that acts on no kind the detector can find
costs nothing. Counts go to ``memstream_sensitive_memories_total`` by tenant (as
``tenant_label`` names it, bounded), kind and action, and to this worker's
:class:`~.sensitive_counts.SensitiveCounts` by the tenant's own id (``GET
/stats/sensitive``); nothing found is logged or put in a span.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType

from prometheus_client import Counter

from streams.consolidation.model import PlannedCandidate
from streams.consolidation.ports import SensitiveDetector
from streams.consolidation.rules.sensitive.kinds import STRUCTURED, Finding, Kind
from streams.consolidation.rules.sensitive.policy import (
    Action,
    Policy,
    Screened,
    layered,
    screen,
)
from streams.consolidation.rules.sensitive.repeated import repeated, said_values
from streams.consolidation.rules.sensitive.within import findings_within, said_within
from streams.consolidation.sensitive_counts import SensitiveCounts
from streams.metrics import SENSITIVE_MEMORIES, SENSITIVE_WINDOW_MESSAGES

log = logging.getLogger(__name__)

SUMMARY_WITHHELD = ("(summary withheld: the messages it sums up hold more sensitive values "
                    "than are looked for in a model's wording)")


def never_dropping(policy: Policy) -> Policy:
    """``policy`` with every ``drop`` turned into ``mask`` (for summaries)."""
    return Policy(MappingProxyType({k: Action.MASK if policy.action(k) is Action.DROP
                                    else policy.action(k) for k in Kind}))


class Screening:
    """Screens candidates and summaries with a tenant's and agent's policy."""

    def __init__(self, detector: SensitiveDetector, deployment: Mapping[str, str], *,
                 tenants: Mapping[str, Mapping[str, str]] | None = None,
                 agents_may_relax: bool = True,
                 tenant_label: Callable[[str], str] = lambda tenant_id: tenant_id,
                 counts: SensitiveCounts | None = None) -> None:
        """``deployment``: the action per kind the settings give; ``tenants``: a tenant's
        actions over it (``ValueError`` on an unknown kind or action in either);
        ``agents_may_relax``: whether an agent's configuration may keep more than its
        tenant's policy; ``counts``: where the counts of memories per tenant are kept
        for the stats API (None: only the metric counts)."""
        self.detector = detector
        self.deployment = Policy.of(deployment)
        self.tenants: dict[str, Policy] = {}
        for tenant, actions in (tenants or {}).items():
            policy, refused = layered(self.deployment, actions)
            if refused:
                raise ValueError(f"sensitive policy of tenant {tenant!r}: unknown kind or "
                                 f"action {', '.join(refused)}")
            self.tenants[tenant] = policy
        self.agents_may_relax = agents_may_relax
        self.tenant_label = tenant_label
        self.counts = counts

    def policy(self, tenant_id: str, agent_id: str,
               overrides: Sequence[tuple[str, str]] = ()) -> Policy:
        """The tenant's policy (the deployment's if it has none of its own) with the
        agent's ``(kind, action)`` overrides that may be applied."""
        base = self.tenants.get(tenant_id, self.deployment)
        if not overrides:
            return base
        policy, refused = layered(base, dict(overrides),
                                  tighten_only=not self.agents_may_relax)
        if refused:
            log.warning("agent %s/%s: sensitive policy entries not applied: %s",
                        tenant_id, agent_id, ", ".join(refused))
        return policy

    def _looks(self, policy: Policy) -> bool:
        """Whether detection can change anything: some kind the detector finds is acted on."""
        findable = STRUCTURED if not self.detector.finds_names else frozenset(Kind)
        return bool(policy.acted_on() & findable)

    def _count(self, tenant_id: str, screened: Screened, counter: Counter) -> None:
        tenant = self.tenant_label(tenant_id)
        for kind, action in screened.done.items():
            counter.labels(tenant, kind.value, action.value).inc()
            if self.counts is not None and counter is SENSITIVE_MEMORIES:
                self.counts.add(tenant_id, kind, action)

    async def _screened(self, tenant_id: str, texts: Sequence[str], policy: Policy,
                        counter: Counter = SENSITIVE_MEMORIES) -> list[Screened | None]:
        """Each text screened, or None where nothing was found."""
        out: list[Screened | None] = []
        for text, findings in zip(texts, await self.detector.detect_all(texts), strict=True):
            if not findings:
                out.append(None)
                continue
            screened = screen(text, findings, policy)
            self._count(tenant_id, screened, counter)
            out.append(screened)
        return out

    async def window_texts(self, tenant_id: str, texts: Sequence[str],
                           policy: Policy) -> list[str | None]:
        """Session-window messages' texts under ``policy``: each as said, masked, or
        None when it holds a kind the policy drops (counted as window messages)."""
        if not texts or not self._looks(policy):
            return list(texts)
        results = await self._screened(tenant_id, texts, policy, SENSITIVE_WINDOW_MESSAGES)
        return [text if r is None else r.text for text, r in zip(texts, results, strict=True)]

    async def candidates(self, tenant_id: str, planned: Sequence[PlannedCandidate],
                         policy: Policy, said: Sequence[str] = ()) -> list[PlannedCandidate]:
        """``planned`` with the dropped ones left out and the masked ones' text masked
        (their masked kinds recorded), in order. A value found in a candidate (an
        episode is a message as said) or in ``said`` (the session's messages, when no
        episode stands for them) is found again in every other candidate that repeats
        it (:mod:`~.rules.sensitive.repeated`: a model's wording of a fact); a session
        with too many such values keeps no fact, only its screened episodes."""
        if not planned or not self._looks(policy):
            return list(planned)
        texts = [p.candidate.content for p in planned]
        episodes = [t for p, t in zip(planned, texts, strict=True)
                    if p.candidate.kind == "episode"]
        inside = [None if p.candidate.kind == "episode" else said_within(t, episodes)
                  for p, t in zip(planned, texts, strict=True)]
        read = [t for t, at in zip(texts, inside, strict=True) if at is None]
        detected = iter(await self.detector.detect_all([*read, *said]))
        found: list[list[Finding]] = [next(detected) if at is None else [] for at in inside]
        of_episode = [f for p, f in zip(planned, found, strict=True)
                      if p.candidate.kind == "episode"]
        for i, at in enumerate(inside):  # a fact said word for word in an episode
            if at is not None:
                found[i] = findings_within(of_episode[at[0]], at[1], len(texts[i]))
        found += list(detected)  # the messages', for their values only
        values = said_values([*texts, *said], found, policy)
        out = []
        for p, text, own in zip(planned, texts, found[:len(texts)], strict=True):
            if values is None and p.candidate.kind != "episode":
                continue  # more values than are looked for again: no worded fact is kept
            findings = [*own, *repeated(text, values or [])]
            if not findings:
                out.append(p)
                continue
            screened = screen(text, findings, policy)
            self._count(tenant_id, screened, SENSITIVE_MEMORIES)
            if screened.dropped:
                continue
            if not screened.masked:
                out.append(p)
                continue
            assert screened.text is not None
            masked = tuple(sorted(k.value for k in screened.masked))
            out.append(replace(p, candidate=replace(p.candidate, content=screened.text,
                                                    masked=masked)))
        return out

    async def kept_out(self, texts: Sequence[str], policy: Policy) -> list[bool]:
        """Whether each text holds what ``policy`` does not keep as said (a kind it masks
        or drops): for memories stored before, so nothing is counted."""
        if not texts or not self._looks(policy):
            return [False] * len(texts)
        found = await self.detector.detect_all(texts)
        return [bool(f) and screen(t, f, policy).text != t
                for t, f in zip(texts, found, strict=True)]

    async def summary(self, tenant_id: str, text: str, policy: Policy,
                      said: Sequence[str] = ()) -> str:
        """``text`` with every kind the policy does not keep masked, and every value
        found in ``said`` (the messages a model summarised) that it repeats."""
        summary_policy = never_dropping(policy)
        if not text or not self._looks(summary_policy):
            return text
        found = await self.detector.detect_all([text, *said])
        values = said_values([text, *said], found, summary_policy)
        if values is None:  # more values than are looked for again: nothing of it kept
            return SUMMARY_WITHHELD
        findings = [*found[0], *repeated(text, values)]
        if not findings:
            return text
        screened = screen(text, findings, summary_policy)
        self._count(tenant_id, screened, SENSITIVE_MEMORIES)
        return text if screened.text is None else screened.text
