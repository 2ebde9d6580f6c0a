"""The stats API of a running worker on MariaDB: a known load, exact counts,
documented shapes, 4xx for bad parameters, and no tenant ever sees another's rows."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from streams.stats.access import new_token, token_hash
from tests.integration.conftest import Stack
from tests.support import stats_api
from tests.support.stats_load import BAD_REQUESTS, CASES, load
from tests.support.worker import WorkerProcess

ADMIN, ACME = new_token(), new_token()
TOKENS = json.dumps([{"sha256": token_hash(ADMIN), "tenants": ["*"]},
                     {"sha256": token_hash(ACME), "tenants": ["acme"]}])


@pytest.fixture(scope="module")
def worker(shared_stack: Stack) -> Iterator[WorkerProcess]:
    # migrates the schema on start
    w = shared_stack.worker(MEMSTREAM_WEB__STATS_TOKENS=TOKENS).start()

    async def fill() -> None:
        engine = shared_stack.engine()
        try:
            await load(engine)
        finally:
            await engine.dispose()

    asyncio.run(fill())
    yield w
    w.stop()


@pytest.fixture(scope="module")
def http(worker: WorkerProcess) -> Iterator[httpx.Client]:
    port = worker.env["MEMSTREAM_WEB__PORT"]
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10,
                      headers={"Authorization": f"Bearer {ADMIN}"}) as client:
        yield client


@pytest.fixture(scope="module")
def anonymous(worker: WorkerProcess) -> Iterator[httpx.Client]:
    port = worker.env["MEMSTREAM_WEB__PORT"]
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
        yield client


ENDPOINTS = [("/stats/overview", {}), ("/stats/top-agents", {"limit": "100"}),
             ("/stats/memory-types", {"by": "cube"}), ("/stats/cubes/user_profile", {}),
             ("/stats/trends", {"from": "2026-11-29", "to": "2026-12-01"}),
             ("/stats/search-trends", {"from": "2026-11-29", "to": "2026-12-01"}),
             ("/stats/sensitive", {})]


@pytest.mark.parametrize(("path", "extra"), ENDPOINTS)
def test_no_data_without_the_right_token(anonymous: httpx.Client, path: str,
                                         extra: dict[str, str]) -> None:
    beta = {"tenant": "beta", **extra}
    for headers, status, code in (
            ({}, 401, "unauthorized"),
            ({"Authorization": "Bearer not-a-token"}, 401, "unauthorized"),
            ({"Authorization": f"Basic {ADMIN}"}, 401, "unauthorized"),
            ({"Authorization": f"Bearer {token_hash(ADMIN)}"}, 401, "unauthorized"),
            ({"Authorization": f"Bearer {ACME}"}, 403, "forbidden")):
        r = anonymous.get(path, params=beta, headers=headers)
        assert r.status_code == status, (headers, r.text)
        assert r.json() == {"error": {"code": code, "message": r.json()["error"]["message"]}}
        assert "beta" not in r.text and "memory" not in r.text
        template = "/stats/cubes/{cube_id}" if path.startswith("/stats/cubes/") else path
        stats_api.check_answer(template, status, r.json())
        if status == 401:
            assert r.headers["WWW-Authenticate"] == "Bearer"
    # a repeated tenant is checked for each value before it is refused as repeated
    r = anonymous.get(path, params=[("tenant", "acme"), ("tenant", "beta"), *extra.items()],
                      headers={"Authorization": f"Bearer {ACME}"})
    assert r.status_code == 403
    r = anonymous.get(path, params={"tenant": "acme", **extra},
                      headers={"Authorization": f"Bearer {ACME}"})
    assert r.status_code == 200, r.text
    assert r.json()["tenant"] == "acme"


def test_metrics_and_health_stay_open_and_faust_pages_are_off(anonymous: httpx.Client) -> None:
    assert anonymous.get("/metrics").status_code == 200
    assert anonymous.get("/health/live").status_code == 200
    for page in ("/router/", "/table/sessions/", "/table/sessions/t1/c1/"):
        r = anonymous.get(page)
        assert r.status_code == 404, (page, r.status_code, r.text[:200])


def _case_id(case: tuple[Any, ...]) -> str:
    path, query, values = case[0], case[1], case[2]
    return path.format(**values) + "?" + "&".join(f"{k}={v}" for k, v in query.items())


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_answers_match_the_load(http: httpx.Client, case: tuple[Any, ...]) -> None:
    path, query, values, expected = case
    r = http.get(path.format(**values), params=query)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/json")
    assert r.json() == expected
    stats_api.check_answer(path, 200, r.json())


@pytest.mark.parametrize("case", BAD_REQUESTS, ids=[_case_id(c) for c in BAD_REQUESTS])
def test_bad_parameters_are_rejected(http: httpx.Client, case: tuple[Any, ...]) -> None:
    path, query, values, status, code, parameter = case
    r = http.get(path.format(**values), params=query)
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code and r.json()["error"]["parameter"] == parameter
    stats_api.check_answer(path, status, r.json())


def test_repeated_and_url_quirks(http: httpx.Client) -> None:
    r = http.get("/stats/overview?tenant=acme&tenant=beta")
    assert r.status_code == 400 and r.json()["error"]["code"] == "repeated_parameter"
    # Grafana's ${__from:date:iso}, and an offset whose "+" was not URL-encoded
    r = http.get("/stats/trends?tenant=acme&from=2026-11-30T08:00:00.000Z"
                 "&to=2026-11-30T10:00:00+01:00&bucket=hour")
    assert r.status_code == 200, r.text
    assert (r.json()["from"], r.json()["to"], r.json()["messages"]) == (
        "2026-11-30T08:00:00Z", "2026-11-30T09:00:00Z", 6)
    assert http.head("/stats/overview", params={"tenant": "acme"}).status_code == 200
    assert http.post("/stats/overview", params={"tenant": "acme"}).status_code == 405
    assert http.get("/stats/nothing", params={"tenant": "acme"}).status_code == 404


def test_no_tenant_sees_another(http: httpx.Client) -> None:
    """Every endpoint, asked for tenants with little or no data, shows none of acme's."""
    span = {"from": "2026-11-29", "to": "2026-12-01", "bucket": "hour"}
    for tenant, foreign in (("beta", ("acme", "ACME")), ("nobody", ("acme", "ACME", "beta")),
                            ("ACME", ("acme",)), ("Acme", ("acme", "ACME"))):
        bodies = [
            http.get("/stats/overview", params={"tenant": tenant}),
            http.get("/stats/top-agents", params={"tenant": tenant, "limit": "100"}),
            http.get("/stats/top-agents", params={"tenant": tenant, "by": "memories"}),
            http.get("/stats/memory-types", params={"tenant": tenant, "by": "cube"}),
            http.get("/stats/cubes/user_profile", params={"tenant": tenant, "limit": "100"}),
            http.get("/stats/cubes/agent_a1", params={"tenant": tenant}),
            http.get("/stats/trends", params={"tenant": tenant, **span}),
            http.get("/stats/search-trends", params={"tenant": tenant, **span}),
        ]
        for r in bodies:
            assert r.status_code == 200, r.text
            text = json.dumps(r.json())
            for other in foreign:
                assert f'"{other} memory' not in text, (tenant, r.url)
            assert r.json()["tenant"] == tenant
        overview = bodies[0].json()
        if tenant in ("nobody", "Acme"):
            assert overview["messages"] == overview["memories"] == overview["searches"] == 0
        top = bodies[1].json()["items"]
        if tenant == "ACME":
            assert top == [{"agent_id": "a1", "messages": 2,
                            "last_message_at": "2026-11-30T08:31:00Z",
                            "memories": 1, "memories_valid": 1}]
        trends = bodies[6].json()
        assert trends["messages"] == {"beta": 2, "nobody": 0, "ACME": 2, "Acme": 0}[tenant]
