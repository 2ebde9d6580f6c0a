"""Model usage and cost: every model call (judge, conflict decision, summary,
embeddings) counted per tenant, agent, model and purpose.

* :mod:`.rules` — pure: which tenants and agents get their own label value (the
  rest are ``other``), what tokens cost by the price table, the UTC day;
* :mod:`.book` — this worker's usage per tenant, agent and hour, bounded, for
  ``/stats/model-usage`` and the daily budgets;
* :mod:`.meter` — :class:`~.meter.ModelMeter`, what the model clients report each
  call to (Prometheus metrics, the book, the caller's tally) and what consolidation
  asks before spending more of a tenant's budget.

Who a call is for reaches the client as an explicit
:class:`~streams.memory.provider.ModelCaller` argument, never through ambient state.
"""
