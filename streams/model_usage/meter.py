"""ModelMeter: what every model client reports each call to, and what consolidation
asks before it spends more of a tenant's tokens.

A client wraps each call in :meth:`ModelMeter.call` (a context manager) and reports
the tokens it took (:meth:`MeteredCall.used`: the API's ``usage``, or counted with
:meth:`ModelMeter.count_chat` / :meth:`ModelMeter.count_texts` when the API gives
none) and each retry (:meth:`MeteredCall.retried`). When the call ends the meter
counts, per tenant, agent, model and purpose, in the ``memstream_model_*``
metrics: the call, its latency (retries included), a failure by error class, the
tokens and their cost by the price table; it adds the usage to the caller's tally
and to this worker's :class:`~.book.UsageBook` (the daily budgets, the stats).

Tenants and agents are labelled by :class:`~.rules.LabelPolicy` (``other`` but
for the named ones), so the series stay bounded whatever the traffic.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from streams import tracing
from streams.memory.provider import ModelCaller, ModelTally
from streams.metrics import (
    MODEL_BUDGET_FALLBACKS,
    MODEL_CALLS,
    MODEL_COST,
    MODEL_FAILURES,
    MODEL_LATENCY,
    MODEL_RETRIES,
    MODEL_TOKENS,
    MODEL_TOKENS_PER_MESSAGE,
)
from streams.model_usage.book import Totals, UsageBook
from streams.model_usage.rules import (
    OTHER,
    LabelPolicy,
    Price,
    budget_of,
    chat_prompt_tokens,
    cost_of,
    over_budget,
)
from streams.tokens import CountTokens, TokenCounter

NO_CALLER = ModelCaller("", "")

# the GenAI semantic conventions of a model call's span
GEN_AI_OPERATION = "gen_ai.operation.name"
GEN_AI_PROVIDER = "gen_ai.provider.name"
GEN_AI_MODEL = "gen_ai.request.model"
GEN_AI_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"


class MeteredCall:
    """One model call being metered; see :meth:`ModelMeter.call`."""

    def __init__(self, meter: ModelMeter, caller: ModelCaller, model: str, purpose: str) -> None:
        self._meter = meter
        self._caller = caller
        self._model = model
        self._labels = (*meter.labels.labels(caller.tenant_id, caller.agent_id),
                        meter.model_label(model), purpose)
        self._usage = Totals(calls=1)
        self._started = 0.0
        operation = "embeddings" if purpose == "embed" else "chat"
        self._span = tracing.span(f"{operation} {model}", {
            GEN_AI_OPERATION: operation, GEN_AI_PROVIDER: "openai", GEN_AI_MODEL: model,
            "memstream.purpose": purpose, tracing.TENANT: caller.tenant_id},
            kind=tracing.CLIENT)

    def retried(self, *_: Any) -> None:
        """One more request of this call after a retryable failure."""
        MODEL_RETRIES.labels(*self._labels).inc()

    def used(self, input_tokens: int, output_tokens: int = 0) -> None:
        """The tokens the call took (once per call; a negative count is 0)."""
        input_tokens, output_tokens = max(0, input_tokens), max(0, output_tokens)
        cost = cost_of(self._meter.prices, self._model, input_tokens, output_tokens)
        MODEL_TOKENS.labels(*self._labels, "in").inc(input_tokens)
        MODEL_TOKENS.labels(*self._labels, "out").inc(output_tokens)
        if cost:
            MODEL_COST.labels(*self._labels).inc(cost)
        self._usage.input_tokens += input_tokens
        self._usage.output_tokens += output_tokens
        self._usage.cost += cost
        tracing.annotate({GEN_AI_INPUT_TOKENS: input_tokens, GEN_AI_OUTPUT_TOKENS: output_tokens})
        tally = self._caller.tally
        if tally is not None:
            tally.input_tokens += input_tokens
            tally.output_tokens += output_tokens
            tally.calls += 1

    def __enter__(self) -> MeteredCall:
        self._span.__enter__()  # current while the call's requests are made
        self._started = time.perf_counter()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        MODEL_LATENCY.labels(*self._labels).observe(time.perf_counter() - self._started)
        MODEL_CALLS.labels(*self._labels).inc()
        if exc is not None and isinstance(exc, Exception):
            MODEL_FAILURES.labels(*self._labels, type(exc).__name__).inc()
            self._usage.failures = 1
        if self._caller.tenant_id:
            self._meter.book.add(self._caller.tenant_id, self._caller.agent_id,
                                 self._meter.clock(), self._usage)
        self._span.__exit__(kind, exc, tb)


class ModelMeter:
    """Usage and cost of the model calls of one worker.

    ``labels``: which tenants and agents get their own label value; ``prices``: the
    price table by model name; ``daily_tokens`` / ``tenant_daily_tokens``: the daily
    token budget of a tenant (0: none); ``count_tokens``: counts text when an API
    reports no usage (cl100k_base by default).
    """

    def __init__(self, *, labels: LabelPolicy | None = None,
                 prices: Mapping[str, Price] | None = None, daily_tokens: int = 0,
                 tenant_daily_tokens: Mapping[str, int] | None = None,
                 book: UsageBook | None = None, count_tokens: CountTokens | None = None,
                 clock: Callable[[], float] = time.time,
                 models: Iterable[str] | None = None) -> None:
        self.labels = labels or LabelPolicy()
        self.prices = dict(prices or {})
        # the models with a label of their own: those configured and priced (None: any)
        self.models = None if models is None else frozenset(models) | frozenset(self.prices)
        self.daily_tokens = daily_tokens
        self.tenant_daily_tokens = dict(tenant_daily_tokens or {})
        self.book = book or UsageBook()
        self._count = count_tokens
        self.clock = clock

    def model_label(self, model: str) -> str:
        """``model``'s label value: ``other`` for a model neither configured nor priced (an
        agent's configuration may name any model: the label stays bounded)."""
        return model if self.models is None or model in self.models else OTHER

    def call(self, caller: ModelCaller | None, model: str, purpose: str) -> MeteredCall:
        """A context manager around one call of ``model`` for ``purpose`` on
        ``caller``'s behalf (``None``: nobody's, counted as ``other``)."""
        return MeteredCall(self, caller or NO_CALLER, model, purpose)

    def count_texts(self, texts: Sequence[str]) -> int:
        """Tokens of ``texts``, counted (an API that reports no usage)."""
        if self._count is None:
            self._count = TokenCounter()
        return sum(self._count(t) for t in texts)

    def count_chat(self, messages: Sequence[Mapping[str, str]]) -> int:
        """Prompt tokens of a chat request, counted (an API that reports no usage)."""
        return chat_prompt_tokens((self.count_texts([m.get("role", "")]),
                                   self.count_texts([m.get("content", "")])) for m in messages)

    def admit(self, tenant_id: str) -> bool:
        """Whether the tenant may still call a model today; a refusal is counted in
        ``memstream_model_budget_fallbacks_total`` (the caller goes without the model)."""
        budget = budget_of(tenant_id, self.daily_tokens, self.tenant_daily_tokens)
        if not over_budget(self.book.spent_today(tenant_id, self.clock()), budget):
            return True
        MODEL_BUDGET_FALLBACKS.labels(self.labels.tenant(tenant_id)).inc()
        return False

    def per_message(self, tenant_id: str, tally: ModelTally, messages: int) -> None:
        """Observe the tokens a session end took per message it consolidated."""
        if messages > 0 and tally.calls:
            MODEL_TOKENS_PER_MESSAGE.labels(self.labels.tenant(tenant_id)).observe(
                tally.tokens / messages)

    def view(self, tenant_id: str, *, hours: int, top: int) -> dict[str, Any]:
        """The tenant's usage on this worker (``GET /stats/model-usage``) with its budget."""
        now = self.clock()
        out = self.book.view(tenant_id, now, hours=hours, top=top)
        out["today"] = {"tokens": self.book.spent_today(tenant_id, now),
                        "budget": budget_of(tenant_id, self.daily_tokens,
                                            self.tenant_daily_tokens)}
        return out
