"""The stats endpoints as pages of the Faust web server (``GET`` and ``HEAD``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streams.stats.params import Query
from streams.stats.service import Endpoint, StatsService


def request_query(request: Any) -> Query:
    """The query string as name -> every value given (aiohttp's multidict)."""
    q = request.query
    return {name: list(q.getall(name)) for name in dict.fromkeys(q.keys())}


def _view(service: StatsService, endpoint: Endpoint) -> Any:
    async def get(self: Any, request: Any, **path: Any) -> Any:
        values: Mapping[str, str] = {k: str(v) for k, v in path.items()}
        answer = await service.answer(endpoint.path, request_query(request), values)
        return self.json(answer.body, status=answer.status)

    get.__name__ = f"stats_{endpoint.name}"
    get.__doc__ = f"GET {endpoint.path}"
    return get


def install_stats(app: Any, service: StatsService) -> None:
    """Register every endpoint of ``service`` on ``app``'s web server."""
    for endpoint in service.endpoints.values():
        app.page(endpoint.path, name=f"stats_{endpoint.name}")(_view(service, endpoint))
