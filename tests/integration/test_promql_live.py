"""Every PromQL expression of the dashboards and alerting rules, against a real
Prometheus scraping a worker under a short load.

A private ``prometheus`` (the Debian package; own port, configuration and data
directory, stopped by its pid) scrapes the test's worker every second and
evaluates ``deploy/prometheus/alerts.yml``. The load exercises every stage:
chat events and a dead letter; an explicit and an idle session end, with a
model that fails once and then answers nothing usable (judge fallbacks, rule
judge, in-batch dedup, a summary; its usage priced, per tenant and agent) and a
newer fact superseding an older one; a MySQL write that fails and is retried;
memory queries answered from the cache, after a cache miss, and partially while
the MemOS provider fails.

Then each expression must parse and return data — an alerting expression,
which is empty while all is well, through the series it is built on
(:func:`tests.support.promql.data_forms`) — and every metric family the
expressions read must have been fed by the worker, except the families in
:data:`NO_DATA_YET`.

The copy of the alerting rules Prometheus loads has each rule's ``for:``
removed, so the ``ALERTS`` series of the Overview dashboard exists within the
test's seconds; the expressions are the shipped ones.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pymysql
import pytest
import yaml
from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis

import streams.metrics as catalog
from streams.adapters.redis.conversation_cache import ConversationCache
from streams.client import MemoryClient
from tests.fakes.memos import FakeMemOS
from tests.fakes.openai import FakeOpenAI
from tests.integration.conftest import Stack, chat_event, session_end_event
from tests.integration.consolidation_support import FAST, memstream, run_status
from tests.support.private_prometheus import PrivatePrometheus
from tests.support.promql import (
    ALERTS,
    alert_expressions,
    dashboard_expressions,
    data_forms,
    substitute,
)
from tests.support.services import KAFKA_BOOTSTRAP, MYSQL_PASSWORD, MYSQL_PORT, MYSQL_USER
from tests.support.worker import WorkerProcess, eventually

# Grafana's variables as a dashboard over the test's few minutes would set them
VARIABLES = {"$__rate_interval": "30s", "$__interval": "5s", "$__range": "10m",
             "$bucket": "1h"}

# Metric families that cannot have data yet because their feature is not built,
# with the reason. Empty: every family the dashboards and alerts read is fed by
# this load. A family listed here that does get data fails the test, so the
# list cannot go stale.
NO_DATA_YET: dict[str, str] = {}


def catalog_families() -> dict[str, tuple[str, str]]:
    """Series name as PromQL writes it -> (family, kind) for every catalog metric."""
    out: dict[str, tuple[str, str]] = {}
    for obj in vars(catalog).values():
        name = getattr(obj, "_name", None)
        if isinstance(obj, Counter):
            out[f"{name}_total"] = (f"{name}_total", "counter")
        elif isinstance(obj, Histogram):
            for suffix in ("_bucket", "_sum", "_count"):
                out[f"{name}{suffix}"] = (f"{name}_count", "histogram")
        elif isinstance(obj, Gauge):
            out[str(name)] = (str(name), "gauge")
    return out


def referenced_families(exprs: list[tuple[str, str]]) -> dict[str, str]:
    """Family -> kind of every catalog metric the expressions read."""
    series = catalog_families()
    out: dict[str, str] = {}
    for _, expr in exprs:
        for word in set(re.findall(r"[A-Za-z_][A-Za-z0-9_:]*", expr)):
            if word in series:
                family, kind = series[word]
                out[family] = kind
    return out


def family_fed(prom: PrivatePrometheus, family: str, kind: str) -> bool:
    """A gauge exists; a counter or histogram has counted something."""
    expr = f"count({family})" if kind == "gauge" else f"max({family}) > 0"
    result = prom.query(expr)["data"]["result"]
    return bool(result)


def rules_without_for() -> str:
    doc = yaml.safe_load(ALERTS.read_text())
    for group in doc["groups"]:
        group["interval"] = "1s"
        for rule in group["rules"]:
            rule.pop("for", None)
    return yaml.safe_dump(doc)


def worker_sample(port: str, name: str, labels: dict[str, str]) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return 0.0


def check_expressions(prom: PrivatePrometheus, exprs: list[tuple[str, str]]) -> list[str]:
    """What is wrong with each expression: it does not parse, or a part has no data."""
    failures = []
    for where, expr in exprs:
        concrete = substitute(expr, VARIABLES)
        answer = prom.query(concrete)
        if answer.get("status") != "success":
            failures.append(f"{where}: does not parse: {answer.get('error')}\n  {concrete}")
            continue
        if answer["data"]["result"]:
            continue
        for form in data_forms(concrete):
            part = prom.query(form)
            if part.get("status") != "success" or not part["data"]["result"]:
                failures.append(f"{where}: no data for {form!r}\n  of {concrete}")
    return failures


@pytest.fixture
def fakes() -> Iterator[tuple[FakeOpenAI, FakeMemOS]]:
    with FakeOpenAI(handler=lambda body: "I have no usable JSON for you.") as llm, \
            FakeMemOS() as memos:
        yield llm, memos


async def fail_one_mysql_write(stack: Stack, worker: WorkerProcess) -> None:
    """Lock the message table, kill the worker's waiting INSERT, unlock: one failed
    and retried write (memstream_sink_failures_total, memstream_sink_retries_total)."""
    port = worker.env["MEMSTREAM_WEB__PORT"]

    def connect() -> Any:
        return pymysql.connect(host="127.0.0.1", port=MYSQL_PORT, user=MYSQL_USER,
                               password=MYSQL_PASSWORD, database=stack.database,
                               autocommit=True, read_timeout=60, write_timeout=60)

    lock, admin = connect(), connect()
    try:
        with lock.cursor() as cur:
            # fail, not hang, should an open transaction of the worker hold the table
            cur.execute("SET SESSION lock_wait_timeout = 20")
            cur.execute("LOCK TABLES conversation_message WRITE")
        await stack.produce([chat_event(0, "p3", content="A message written twice.")])

        mine = {lock.thread_id(), admin.thread_id()}

        def waiting() -> list[int]:
            with admin.cursor() as cur:
                cur.execute("SELECT ID, STATE, INFO FROM information_schema.PROCESSLIST "
                            "WHERE DB = %s AND STATE LIKE %s", (stack.database, "%lock%"))
                rows = cur.fetchall()
            # the ingest sink's statements: its lookup of stored events, its insert
            sink = ("SELECT conversation_message.tenant_id, conversation_message.event_id",
                    "INSERT INTO conversation_message")
            return [int(r[0]) for r in rows
                    if int(r[0]) not in mine and (r[2] or "").lstrip().startswith(sink)]

        await eventually(lambda: bool(waiting()), 30, "the worker's insert waiting")
        with admin.cursor() as cur:
            for conn_id in waiting():
                cur.execute(f"KILL {conn_id}")
        await eventually(lambda: worker_sample(port, "memstream_sink_retries_total",
                                               {"sink": "mysql"}) >= 1, 30, "a retried write")
    finally:
        with lock.cursor() as cur:
            cur.execute("UNLOCK TABLES")
        lock.close()
        admin.close()


async def ask_queries(stack: Stack) -> None:
    """Answered from the cache, after a cache miss, and partially (MemOS failing)."""
    async with MemoryClient(KAFKA_BOOTSTRAP, request_topic=stack.topics["queries"],
                            reply_topic=f"{stack.name}.replies", timeout_s=15) as client:
        r = await client.query(tenant_id="t1", user_id="u1", agent_id="a1",
                               conversation_id="p1", message="Where do I live?")
        assert r.error is None and r.short_term is not None
        redis = Redis.from_url(stack.redis_url or "")
        try:
            key = ConversationCache(None, prefix=stack.name).list_key("t1", "p1")
            assert await redis.delete(key) == 1
        finally:
            await redis.aclose()
        r = await client.query(tenant_id="t1", user_id="u1", agent_id="a1",
                               conversation_id="p1", message="What do I drink?")
        assert r.error is None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until the agent configuration reached the worker
            r = await client.query(tenant_id="t1", user_id="u1", agent_id="a9",
                                   message="Anything about me?")
            if r.warnings:
                break
            await asyncio.sleep(0.5)
        assert r.warnings, "the failing MemOS provider should make a partial reply"


async def test_every_promql_expression_returns_data(
    stack: Stack, fakes: tuple[FakeOpenAI, FakeMemOS], tmp_path: Path
) -> None:
    started = time.monotonic()

    def step(what: str) -> None:  # shown when the test fails
        print(f"{time.monotonic() - started:6.1f}s {what}", flush=True)

    llm, memos = fakes
    llm.fail_next(1, status=500)  # one failed model call, then retried
    memos.fail_always(500)
    stack.extra_env.update({
        **FAST,
        "MEMSTREAM_LLM__BASE_URL": llm.base_url,
        "MEMSTREAM_LLM__MODEL": "test-model",
        "MEMSTREAM_MEMOS__BASE_URL": memos.url,
        "MEMSTREAM_HEALTH__LAG_INTERVAL_S": "0.5",
        "MEMSTREAM_INGEST__RETRY_INITIAL_S": "0.05",
        # the model's usage of t1 under its own label, priced (memstream_model_cost_total)
        "MEMSTREAM_MODEL_USAGE__LABELLED_TENANTS": '["t1"]',
        "MEMSTREAM_MODEL_USAGE__LABELLED_AGENTS": '["a1"]',
        "MEMSTREAM_MODEL_USAGE__PRICES":
            '{"test-model": {"input_per_1k": 0.5, "output_per_1k": 1.5}}',
    })
    worker = stack.worker().start()
    port = worker.env["MEMSTREAM_WEB__PORT"]
    prom = PrivatePrometheus(tmp_path / "prometheus").start(
        {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
         "rule_files": ["alerts.yml"],
         "scrape_configs": [{"job_name": "memstream", "metrics_path": "/metrics",
                             "scrape_interval": "1s",
                             "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}]},
        rule_files={"alerts.yml": rules_without_for()})
    try:
        step("worker and prometheus up")
        memstream(stack, "agent-config", "set", "--tenant", "t1", "--agent", "a9",
                  "--provider", "MEMOS", "--open-long-memory", "on", "--model", "test-model")
        first = ["I live in Berlin.", "Noted.", "I like green tea.", "Sure.",
                 "I like green tea.", "Got it."]
        filler = [f"Tell me about step {i}." if i % 2 == 0 else f"Step {i} is done."
                  for i in range(20)]
        await stack.produce(
            [chat_event(i, "p1", content=c) for i, c in enumerate(first + filler)]
            + [session_end_event("p1", n=0), b"\x00 not json"]
            + [chat_event(0, "p2", content="I enjoy hiking.")])  # ends idle
        step("first session sent")
        await eventually(lambda: run_status(stack, "t1/p1#1") == "done", 60, "the first close")
        step("first session consolidated")
        await stack.produce([chat_event(100, "p1", content="Actually, I live in Paris now."),
                             chat_event(101, "p1", content="Noted."),
                             session_end_event("p1", n=1)])
        await eventually(lambda: run_status(stack, "t1/p1#2") == "done", 60, "the second close")
        await eventually(lambda: run_status(stack, "t1/p2#1") == "done", 60, "the idle close")
        step("second session and the idle one consolidated")
        await fail_one_mysql_write(stack, worker)
        step("mysql write failed and retried")
        await ask_queries(stack)
        step("queries answered")
        receipt = memstream(stack, "erase", "--tenant", "t1", "--conversation", "p2", "--quiet")
        assert '"status": "done"' in receipt.stdout, receipt.stdout
        await stack.produce([chat_event(0, "p2", content="I enjoy hiking.")])  # skipped
        step("a conversation erased, its event replayed")
        exprs = dashboard_expressions() + alert_expressions()
        families = referenced_families(exprs)
        assert len(families) > 25
        expected = {f: k for f, k in families.items() if f not in NO_DATA_YET}

        def all_fed() -> bool:
            return all(family_fed(prom, f, k) for f, k in expected.items())

        try:
            await eventually(all_fed, 30, "every metric family scraped")
        except TimeoutError:
            missing = sorted(f for f, k in expected.items() if not family_fed(prom, f, k))
            pytest.fail(f"metric families without data: {missing}")
        for family, why in NO_DATA_YET.items():
            assert not family_fed(prom, family, families.get(family, "counter")), (
                f"{family} has data now ({why} no longer holds): remove it from NO_DATA_YET")
        await eventually(lambda: bool(prom.query('ALERTS{alertstate="firing"}')["data"]["result"]),
                         15, "a firing alert")

        step("every family fed, an alert firing")
        # a series needs two scrapes before rate() and increase() see it
        failures = check_expressions(prom, exprs)
        deadline = time.monotonic() + 20
        while failures and time.monotonic() < deadline:
            await asyncio.sleep(1)
            failures = check_expressions(prom, exprs)
        assert not failures, "\n".join(failures)
        assert time.monotonic() - started < 120
    finally:
        prom.stop()
