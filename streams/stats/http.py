"""The stats endpoints as pages of the Faust web server (``GET`` and ``HEAD``),
each behind :class:`~streams.stats.access.StatsAccess`: the bearer token is
checked before the parameters are parsed or any query runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streams.stats.access import StatsAccess
from streams.stats.params import Query
from streams.stats.service import Endpoint, StatsService


def request_query(request: Any) -> Query:
    """The query string as name -> every value given (aiohttp's multidict)."""
    q = request.query
    return {name: list(q.getall(name)) for name in dict.fromkeys(q.keys())}


def _view(service: StatsService, access: StatsAccess, endpoint: Endpoint) -> Any:
    async def get(self: Any, request: Any, **path: Any) -> Any:
        auth = request.headers.get("Authorization")
        asked = list(request.query.getall("tenant", [])) or [None]  # a repeat: each one
        decision = next((d for d in (access.check(auth, t) for t in asked) if not d.allowed),
                        access.check(auth, None))
        if not decision.allowed:
            headers = {"WWW-Authenticate": "Bearer"} if decision.status == 401 else {}
            return self.json(decision.body(), status=decision.status, headers=headers)
        values: Mapping[str, str] = {k: str(v) for k, v in path.items()}
        answer = await service.answer(endpoint.path, request_query(request), values)
        return self.json(answer.body, status=answer.status)

    get.__name__ = f"stats_{endpoint.name}"
    get.__doc__ = f"GET {endpoint.path}"
    return get


def install_stats(app: Any, service: StatsService, access: StatsAccess) -> None:
    """Register every endpoint of ``service`` on ``app``'s web server."""
    for endpoint in service.endpoints.values():
        app.page(endpoint.path, name=f"stats_{endpoint.name}")(
            _view(service, access, endpoint))
