"""The read-only stats API on the worker's web port (``/stats/*``).

Every answer is computed from MySQL (or the embedded SQLite) with queries that
read only the asking tenant's index ranges; see :mod:`streams.adapters.db.schema.stats`
for the indexes and ``docs/stats-api.yaml`` for the HTTP contract.

* :mod:`streams.stats.params` — query parameters: parsing and the 4xx errors;
* :mod:`streams.stats.buckets` — hour and day buckets, per SQL dialect;
* :mod:`streams.stats.queries` and :mod:`streams.stats.trends` — the SQL;
* :mod:`streams.stats.service` — the endpoints, independent of any web server;
* :mod:`streams.stats.http` — the endpoints as Faust web pages;
* :mod:`streams.stats.search_log` — the record of memory searches the query
  path writes.
"""
