"""docs/stats-api.yaml describes exactly the routes and parameters the code serves."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.settings import WebSettings
from streams.stats.access import StatsAccess
from streams.stats.http import install_stats
from streams.stats.service import StatsService
from tests.support import stats_api


async def _no_engine() -> AsyncEngine:
    raise AssertionError("no database in this test")


def service() -> StatsService:
    w = WebSettings()
    return StatsService(_no_engine, max_limit=w.stats_max_limit, max_buckets=w.stats_max_buckets)


class RecordingApp:
    def __init__(self) -> None:
        self.pages: dict[str, Any] = {}

    def page(self, path: str, *, name: str) -> Any:
        def register(handler: Any) -> Any:
            self.pages[path] = handler
            return handler
        return register


def test_the_document_is_valid_openapi_3_1() -> None:
    doc = stats_api.spec()
    assert doc["openapi"].startswith("3.1")
    # every component schema is a valid JSON Schema 2020-12
    for schema in doc["components"]["schemas"].values():
        jsonschema.Draft202012Validator.check_schema(schema)


def test_routes_match() -> None:
    app = RecordingApp()
    install_stats(app, service(), StatsAccess([]))
    assert set(app.pages) == set(stats_api.spec()["paths"])
    assert set(service().endpoints) == set(stats_api.spec()["paths"])
    for path in stats_api.spec()["paths"]:
        assert set(stats_api.spec()["paths"][path]) == {"get"}, f"{path}: only GET is served"


@pytest.mark.parametrize("path", sorted(service().endpoints))
def test_parameters_match(path: str) -> None:
    endpoint = service().endpoints[path]
    documented = stats_api.parameters(path)
    in_query = {n: p for n, p in documented.items() if p["in"] == "query"}
    in_path = {n for n, p in documented.items() if p["in"] == "path"}
    assert in_path == set(endpoint.path_params)
    assert all(documented[n]["required"] for n in in_path)
    assert set(in_query) == {p.name for p in endpoint.params}
    for p in endpoint.params:
        doc = in_query[p.name]
        schema = doc["schema"]
        assert doc["required"] is p.required, p.name
        assert schema.get("default") == p.default, p.name
        if p.kind == "integer":
            assert schema["type"] == "integer"
            assert (schema.get("minimum"), schema.get("maximum")) == (p.minimum, p.maximum), p.name
        elif p.kind == "datetime":
            assert schema == {"type": "string", "format": "date-time"}
        else:
            assert schema["type"] == "string"
            assert tuple(schema.get("enum", ())) == p.choices, p.name
            assert schema.get("maxLength") == p.max_length, p.name


@pytest.mark.parametrize("path", sorted(service().endpoints))
def test_answer_schemas_match(path: str) -> None:
    endpoint = service().endpoints[path]
    assert stats_api.response_schema(path) == endpoint.schema
    # an endpoint answered from the worker's memory never waits for the database
    statuses = ("400", "401", "403") + (("503", "504") if endpoint.local is None else ())
    for status in statuses:
        assert stats_api.response_schema(path, status) == "Error"
    if endpoint.local is not None:
        assert not {"503", "504"} & set(stats_api.operation(path)["responses"])


def test_error_codes_are_documented() -> None:
    stats_api.check({"error": {"code": "too_many_buckets", "message": "m", "parameter": "bucket"}},
                    "Error")
    with pytest.raises(jsonschema.ValidationError):
        stats_api.check({"error": {"code": "teapot", "message": "m"}}, "Error")


def test_schemas_reject_undocumented_fields() -> None:
    page = {"tenant": "t", "by": "messages", "items": [], "limit": 10, "offset": 0, "total": 0,
            "next_offset": None}
    stats_api.check(page, "TopAgents")
    with pytest.raises(jsonschema.ValidationError):
        stats_api.check({**page, "extra": 1}, "TopAgents")
    with pytest.raises(jsonschema.ValidationError):
        stats_api.check({k: v for k, v in page.items() if k != "total"}, "TopAgents")
