"""Quotas per tenant: how much of a worker one tenant's requests (queries, chat
events into ingest) may take.

* :mod:`streams.quotas.rules` — the token bucket, pure (time is an argument);
* :mod:`streams.quotas.book` — one quota's buckets, one per tenant seen lately
  (at most ``max_tenants``, least recently seen dropped first), its limits by
  tenant, and every decision counted (``memstream_quota_decisions_total``).

A quota is held per worker: a tenant whose requests reach several workers gets
each worker's share.
"""
