"""The stats endpoints, independent of the web server that serves them.

:class:`StatsService` knows each endpoint's path, its parameters and the
OpenAPI schema of its answer (:class:`Endpoint`, mirrored by
``docs/stats-api.yaml``), and answers a request with a status and a JSON body:

* 200 and the endpoint's body (``/stats/quotas`` from this worker's quota books,
  ``/stats/model-usage`` from its model meter, ``/stats/sensitive`` from its counts
  of sensitive content, without the database);
* 4xx and ``{"error": {code, message, parameter}}`` for bad parameters;
* 503 ``database_unavailable`` when the database cannot be reached;
* 504 ``timeout`` when the queries take longer than the configured limit.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from streams.consolidation.sensitive_counts import SensitiveCounts
from streams.model_usage.meter import ModelMeter
from streams.stats import queries, trends
from streams.stats.buckets import BUCKETS, time_range
from streams.stats.params import (
    ID_MAX_CHARS,
    BadRequest,
    Param,
    Query,
    Values,
    limit_param,
    offset_param,
    parse,
    tenant_param,
)

log = logging.getLogger(__name__)

# memory groups listed by default: every type, scope and kind fit on one page
_GROUPS_LIMIT = 50

# one endpoint's queries on a connection: (parameters, path values) -> the answer's body
RunQueries = Callable[[AsyncConnection, Values, Mapping[str, str]], Awaitable[dict[str, Any]]]
# an endpoint answered from this worker's memory: parameters -> the answer's body
RunLocal = Callable[[Values], dict[str, Any]]


@dataclass(frozen=True)
class Endpoint:
    """One ``GET`` route: its parameters, path parameters and answer schema; answered by
    ``run`` on a database connection, or by ``local`` without one."""

    name: str
    path: str
    params: tuple[Param, ...]
    schema: str
    run: RunQueries | None
    path_params: tuple[str, ...] = ()
    local: RunLocal | None = None


@dataclass(frozen=True)
class StatsAnswer:
    """An HTTP status and the JSON body to send with it."""

    status: int
    body: dict[str, Any]


def _path_value(path: Mapping[str, str], name: str) -> str:
    value = path.get(name, "")
    if not value or len(value) > ID_MAX_CHARS or any(ord(c) < 32 for c in value):
        raise BadRequest("invalid_parameter",
                         f"{name}: must have 1 to {ID_MAX_CHARS} printable characters", name)
    return value


class QuotaView(Protocol):
    """A quota of this worker: its row for a tenant (``docs/stats-api.yaml``, ``Quota``)."""

    def view(self, tenant: str, now: float) -> dict[str, Any]: ...


class ModelUsageView(Protocol):
    """This worker's model usage of a tenant (``docs/stats-api.yaml``, ``ModelUsage``)."""

    def view(self, tenant_id: str, *, hours: int, top: int) -> dict[str, Any]: ...


class SensitiveView(Protocol):
    """This worker's counts of sensitive content of a tenant (``docs/stats-api.yaml``,
    ``Sensitive``)."""

    def view(self, tenant_id: str) -> dict[str, Any]: ...


MODEL_USAGE_HOURS = 24 * 31


class StatsService:
    """Answers the ``/stats/*`` endpoints from the database ``engine()`` returns,
    ``/stats/quotas`` from ``quotas`` (this worker's quota books, by quota name) and
    ``/stats/model-usage`` from ``model_usage`` (this worker's model meter; without
    one, a tenant with no usage) and ``/stats/sensitive`` from ``sensitive`` (this
    worker's counts per kind and action; without them, zeros)."""

    def __init__(self, engine: Callable[[], Awaitable[AsyncEngine]], *, max_limit: int = 100,
                 max_buckets: int = 1000, timeout_s: float = 10.0,
                 quotas: Mapping[str, QuotaView] | None = None,
                 model_usage: ModelUsageView | None = None,
                 sensitive: SensitiveView | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self._engine = engine
        self.quotas = dict(quotas or {})
        self.model_usage = model_usage
        self.sensitive = sensitive
        self.clock = clock
        self.max_buckets = max_buckets
        self.timeout_s = timeout_s
        tenant = tenant_param()
        span = (Param("from", "datetime", required=True), Param("to", "datetime", required=True),
                Param("bucket", choices=tuple(BUCKETS), default="day"))
        page = (limit_param(10, max_limit), offset_param())
        self.endpoints: dict[str, Endpoint] = {e.path: e for e in [
            Endpoint("overview", "/stats/overview", (tenant,), "Overview", self._overview),
            Endpoint("memory_types", "/stats/memory-types",
                     (tenant, Param("by", choices=tuple(queries.MEMORY_GROUPS), default="type"),
                      limit_param(_GROUPS_LIMIT, max_limit), offset_param()),
                     "MemoryTypes", self._memory_types),
            Endpoint("trends", "/stats/trends", (tenant, *span), "Trends", self._trends),
            Endpoint("top_agents", "/stats/top-agents",
                     (tenant, Param("by", choices=("messages", "memories"), default="messages"),
                      *page), "TopAgents", self._top_agents),
            Endpoint("cube", "/stats/cubes/{cube_id}",
                     (tenant, Param("user", max_length=ID_MAX_CHARS), *page), "Cube",
                     self._cube, path_params=("cube_id",)),
            Endpoint("search_trends", "/stats/search-trends", (tenant, *span), "SearchTrends",
                     self._search_trends),
            Endpoint("quotas", "/stats/quotas", (tenant,), "Quotas", None,
                     local=self._quotas),
            Endpoint("model_usage", "/stats/model-usage",
                     (tenant, Param("hours", "integer", minimum=1, maximum=MODEL_USAGE_HOURS,
                                    default=24), limit_param(10, max_limit)),
                     "ModelUsage", None, local=self._model_usage),
            Endpoint("sensitive", "/stats/sensitive", (tenant,), "Sensitive", None,
                     local=self._sensitive),
        ]}

    async def answer(self, path: str, query: Query,
                     path_values: Mapping[str, str] | None = None) -> StatsAnswer:
        """Answer the endpoint registered under ``path`` (its template)."""
        endpoint = self.endpoints[path]
        try:
            values = parse(query, endpoint.params)
            for name in endpoint.path_params:
                _path_value(path_values or {}, name)
            if any(p.name == "from" for p in endpoint.params):
                time_range(values, self.max_buckets)
            if endpoint.local is not None:
                return StatsAnswer(200, endpoint.local(values))
            assert endpoint.run is not None
            engine = await self._engine()
            async with asyncio.timeout(self.timeout_s), engine.connect() as conn:
                body = await endpoint.run(conn, values, path_values or {})
            return StatsAnswer(200, body)
        except BadRequest as exc:
            return StatsAnswer(exc.status, exc.body())
        except TimeoutError:
            return StatsAnswer(504, {"error": {
                "code": "timeout", "message": f"the queries took longer than {self.timeout_s}s"}})
        except (OperationalError, DBAPIError, OSError) as exc:
            log.warning("stats %s: database unavailable: %s: %s", endpoint.name,
                        type(exc).__name__, exc)
            return StatsAnswer(503, {"error": {
                "code": "database_unavailable", "message": "the database cannot be reached"}})

    async def _overview(self, conn: AsyncConnection, v: Values,
                        path: Mapping[str, str]) -> dict[str, Any]:
        return await queries.overview(conn, v.text("tenant"))

    async def _memory_types(self, conn: AsyncConnection, v: Values,
                            path: Mapping[str, str]) -> dict[str, Any]:
        return await queries.memory_distribution(conn, v.text("tenant"), v.text("by"),
                                                 v.integer("limit"), v.integer("offset"))

    async def _trends(self, conn: AsyncConnection, v: Values,
                      path: Mapping[str, str]) -> dict[str, Any]:
        return await trends.activity(conn, v.text("tenant"), time_range(v, self.max_buckets))

    async def _search_trends(self, conn: AsyncConnection, v: Values,
                             path: Mapping[str, str]) -> dict[str, Any]:
        return await trends.searches(conn, v.text("tenant"), time_range(v, self.max_buckets))

    async def _top_agents(self, conn: AsyncConnection, v: Values,
                          path: Mapping[str, str]) -> dict[str, Any]:
        return await queries.top_agents(conn, v.text("tenant"), v.text("by"),
                                        v.integer("limit"), v.integer("offset"))

    async def _cube(self, conn: AsyncConnection, v: Values,
                    path: Mapping[str, str]) -> dict[str, Any]:
        return await queries.cube_detail(conn, v.text("tenant"), _path_value(path, "cube_id"),
                                         v.optional_text("user"), v.integer("limit"),
                                         v.integer("offset"))

    def _model_usage(self, v: Values) -> dict[str, Any]:
        meter = self.model_usage if self.model_usage is not None else ModelMeter(
            clock=self.clock)
        return meter.view(v.text("tenant"), hours=v.integer("hours"), top=v.integer("limit"))

    def _sensitive(self, v: Values) -> dict[str, Any]:
        counts = self.sensitive if self.sensitive is not None else SensitiveCounts(
            clock=self.clock)
        return counts.view(v.text("tenant"))

    def _quotas(self, v: Values) -> dict[str, Any]:
        tenant, now = v.text("tenant"), self.clock()
        return {"tenant": tenant,
                "quotas": [book.view(tenant, now) for _, book in sorted(self.quotas.items())]}
