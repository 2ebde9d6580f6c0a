"""The judge (model, else rules) and the conflict decider (model per cube batch, else rules).

:class:`MemoryJudge` makes one model call per session end: the new messages
marked ``[NEW]`` after up to ``context`` earlier ones. Only a session whose new
messages do not fit ``max_input_tokens`` is judged in several parts. Any model
failure (error after the client's retries, timeout, an answer without content,
output with no usable JSON) falls back to the rule judge over that part's new
messages only, counted in ``memstream_judge_fallbacks_total`` by reason.

:class:`ConflictDecider` asks the model once per cube batch, and only when the
search found stored memories for at least one candidate; without a model, or
when the call fails, :func:`~streams.consolidation.rules.conflicts.decide_by_rules` decides.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from streams.consolidation.rules.conflicts import (
    ConflictOutputError,
    Decision,
    build_conflict_messages,
    decide_by_rules,
    parse_conflict_output,
)
from streams.consolidation.rules.llm_judge import (
    JudgeOutputError,
    build_judge_messages,
    parse_judge_output,
)
from streams.consolidation.rules.rule_judge import rule_judge
from streams.memory.model import MemoryCandidate, SourceMessage, StoredMemory
from streams.memory.provider import (
    ChatCompleter,
    EmptyModelAnswer,
    ModelCaller,
    ProviderError,
    ProviderTimeout,
)
from streams.metrics import CANDIDATES, CONFLICT_DECISIONS, JUDGE_FALLBACKS
from streams.tokens import CountTokens

log = logging.getLogger(__name__)
JudgeKind = Literal["model", "rules"]
NOBODY = ModelCaller("", "")


def fallback_reason(exc: Exception) -> str:
    if isinstance(exc, ProviderTimeout):
        return "timeout"
    if isinstance(exc, EmptyModelAnswer):
        return "empty"
    if isinstance(exc, JudgeOutputError | ConflictOutputError):
        return "unparseable"
    return "error"


@dataclass
class Judgement:
    candidates: list[MemoryCandidate]
    kind: JudgeKind
    model_calls: int = 0
    fallbacks: int = 0


class MemoryJudge:
    def __init__(self, *, count_tokens: CountTokens, max_items: int = 20,
                 max_input_tokens: int = 12_000) -> None:
        self.count_tokens = count_tokens
        self.max_items = max_items
        self.max_input_tokens = max_input_tokens

    def parts(self, context: Sequence[SourceMessage],
              new: Sequence[SourceMessage]) -> list[list[SourceMessage]]:
        """The session split so each part's prompt fits the budget: the first part
        shows ``context``, each later one the tail of the part before it."""
        base = self.count_tokens(build_judge_messages([], max_items=self.max_items)[0]["content"])
        cost = [self.count_tokens(m.content) + 12 for m in new]
        parts: list[list[SourceMessage]] = []
        current: list[SourceMessage] = []
        shown = list(context)
        used = base + sum(self.count_tokens(m.content) + 12 for m in shown)
        for m, c in zip(new, cost, strict=True):
            if current and used + c > self.max_input_tokens:
                parts.append(shown + current)
                shown = [SourceMessage(x.event_id, x.role, x.content, x.created_at, x.name, False)
                         for x in current[-4:]]
                current = []
                used = base + sum(self.count_tokens(x.content) + 12 for x in shown)
            current.append(m)
            used += c
        if current:
            parts.append(shown + current)
        return parts

    async def judge(self, model: ChatCompleter | None, context: Sequence[SourceMessage],
                    new: Sequence[SourceMessage], *,
                    caller: ModelCaller | None = None) -> Judgement:
        """Candidates from ``new`` (messages with ``new=True``), in order; the model's
        usage is counted for ``caller`` (nobody's when None)."""
        if model is None:
            found = rule_judge(new)
            CANDIDATES.labels("rules").inc(len(found))
            return Judgement(found, "rules")
        out = Judgement([], "model")
        for part in self.parts(context, new):
            fresh = [m for m in part if m.new]
            out.model_calls += 1
            try:
                answer = await model.complete(
                    build_judge_messages(part, max_items=self.max_items), purpose="judge",
                    caller=caller or NOBODY)
                found = parse_judge_output(answer.text, fresh)[: self.max_items]
                CANDIDATES.labels("model").inc(len(found))
            except (ProviderError, JudgeOutputError) as exc:
                reason = fallback_reason(exc)
                JUDGE_FALLBACKS.labels(reason).inc()
                log.warning("judge model failed (%s: %s); rule judge instead", reason, exc)
                found = rule_judge(fresh)
                CANDIDATES.labels("rules").inc(len(found))
                out.fallbacks += 1
            out.candidates.extend(found)
        if out.fallbacks == out.model_calls:
            out.kind = "rules"
        return out


class ConflictDecider:
    def __init__(self, *, duplicate_threshold: float = 0.8) -> None:
        self.duplicate_threshold = duplicate_threshold

    def by_rules(self, candidates: Sequence[MemoryCandidate],
                 existing: Sequence[Sequence[StoredMemory]]) -> list[Decision]:
        return [decide_by_rules(c, found, duplicate_threshold=self.duplicate_threshold)
                for c, found in zip(candidates, existing, strict=True)]

    async def decide(self, model: ChatCompleter | None, cube: str,
                     candidates: Sequence[MemoryCandidate],
                     existing: Sequence[Sequence[StoredMemory]], *,
                     caller: ModelCaller | None = None) -> tuple[list[Decision], int]:
        """One decision per candidate and the number of model calls made (0 or 1); the
        model's usage is counted for ``caller`` (nobody's when None)."""
        if not candidates:
            return [], 0
        if model is None or not any(existing):
            decisions = self.by_rules(candidates, existing)
            self._count(decisions)
            return decisions, 0
        try:
            answer = await model.complete(
                build_conflict_messages(cube, candidates, existing), purpose="conflict",
                caller=caller or NOBODY)
            decisions = parse_conflict_output(answer.text, candidates, existing)
        except (ProviderError, ConflictOutputError) as exc:
            log.warning("conflict model failed (%s: %s); rules instead", fallback_reason(exc), exc)
            decisions = self.by_rules(candidates, existing)
        self._count(decisions)
        return decisions, 1

    @staticmethod
    def _count(decisions: Sequence[Decision]) -> None:
        for d in decisions:
            CONFLICT_DECISIONS.labels(d.action, decider_of(d)).inc()


def decider_of(decision: Decision) -> str:
    return "model" if decision.reason.startswith("model:") else "rules"
