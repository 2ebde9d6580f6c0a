"""Every statement an erasure sends reads through an index (finding 4 of issue 41).

A MariaDB database migrated to head is filled with thirty tenants' rows in every
table an erasure touches, and ANALYZEd. Then the erasure path runs for real —
dry runs and erasures of a user, a conversation (a sub-agent's too), one memory
and a tenant, a retention pass, the ingest fence's read, the registry's refresh
(``marks_since`` and ``last_done()``, every second on every worker), a blocked
erasure's record — and every statement it sends is EXPLAINed on its own
connection just before it runs, with its parameters, on the data as it is then.
A plan that reads a table whole (``type`` ``ALL``, or ``index``: every entry of
an index) fails the test, naming the statement.

The control drops the indexes migration 0014 adds and shows the same run finds
full scans: the check sees what the migration prevents.
"""

from __future__ import annotations

import importlib.util
import json
import random
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy import bindparam, event, func, insert, text
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.engine import create_engine
from streams.adapters.db.erasure_log import TableErasureLog
from streams.adapters.db.erasure_reads import ConversationReads
from streams.adapters.db.messages import MessageStore
from streams.adapters.db.migrate import migrations_dir
from streams.adapters.db.schema.all_tables import metadata
from streams.erasure.registry import ErasureRegistry
from streams.memory.agent_configs import StaticAgentConfigs
from streams.memory.providers.builtin.provider import BuiltinProvider
from streams.memory.registry import ModelFactory, ProviderHandle, ProviderRegistry
from streams.settings import DatabaseSettings
from streams.testing.erasure import FencePassingPublisher
from streams.testing.session import InMemoryHotCopy
from streams.wire.erasure import ErasureRequest
from tests.support.services import drop_database, migrated_database, mysql_cli, unique
from tests.support.wiring import FakeParts, settings_for_tests, wiring

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 1, 8, 0)
TENANTS = [f"bg{i:02d}" for i in range(30)]  # "bg00" is erased whole, "bg01" has the subjects
USERS, CONVERSATIONS, MESSAGES, MEMORIES = 8, 4, 6, 20
FULL_SCANS = ("ALL", "index")
OLD = timedelta(days=60)  # what a retention of 30 days deletes
NOW = (T0 + timedelta(days=1)).replace(tzinfo=UTC).timestamp()


def _migration() -> ModuleType:
    path = next(migrations_dir().glob("versions/*_erasure_indexes.py"))
    spec = importlib.util.spec_from_file_location("migration_erasure_indexes", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------ the data
def _rows() -> dict[str, list[dict[str, Any]]]:
    """Every tenant: users, their conversations and messages, runs, candidates, ledger
    rows, memories with postings and vectors, origins, reprocess jobs, searches; and
    a thousand finished erasures with their counts and fences."""
    rnd = random.Random(41)
    out: dict[str, list[dict[str, Any]]] = {t.name: [] for t in metadata.sorted_tables}
    msg_id = mem_id = scope_id = 0
    scopes: dict[tuple[str, str, str], int] = {}

    def scope(tenant: str, cube: str, owner: str) -> int:
        nonlocal scope_id
        if (tenant, cube, owner) not in scopes:
            scope_id += 1
            scopes[(tenant, cube, owner)] = scope_id
            out["memory_scope_stats"].append({
                "id": scope_id, "tenant_id": tenant, "cube": cube, "owner_id": owner,
                "doc_count": 0, "total_len": 0, "version": 1, "updated_at": T0})
        return scopes[(tenant, cube, owner)]

    for t in TENANTS:

        for j in range(2):
            job = f"{t}-job{j}"
            out["reprocess_job"].append({
                "job_id": job, "tenant_id": t, "user_id": f"u{j}", "since": None,
                "status": "done", "active": None, "sessions": 10, "retired": 10,
                "created_at": T0, "updated_at": T0, "finished_at": T0})
            for k in range(10):
                closed = f"{job}:{t}/c{j}-{k}#1"
                out["reprocess_session"].append({
                    "closed_id": closed, "job_id": job, "seq": k, "conversation_id": f"u{j}-c{k}",
                    "user_id": f"u{j}", "agent_id": "a0", "first_at": T0, "last_at": T0,
                    "message_count": 5})
                out["reprocess_message"] += [{"closed_id": closed, "message_id": 10 * k + m}
                                             for m in range(5)]
                out["reprocess_retire"].append({
                    "job_id": job, "provider": "mysql", "memory_id": f"{t}-r{k}",
                    "cube": "user_profile", "user_id": f"u{j}", "agent_id": "a0",
                    "retired_at": T0})
        for u in range(USERS):
            user = f"u{u}"
            for c in range(CONVERSATIONS):
                conv = f"{user}-c{c}"
                agent = f"a{c % 2}"
                closed = f"{t}/{conv}#1"
                for m in range(MESSAGES):
                    msg_id += 1
                    # one in fifty is past the retention of the test's clock
                    at = T0 + timedelta(minutes=msg_id % 5000) - OLD * (msg_id % 50 == 0)
                    event_id = f"{conv}-m{m}"
                    out["conversation_message"].append({
                        "id": msg_id, "tenant_id": t, "event_id": event_id,
                        "conversation_id": conv, "user_id": user, "agent_id": agent,
                        "role": "user" if m % 2 == 0 else "assistant", "name": None,
                        "content": f"message {m} of {conv}", "tool_calls": None,
                        "tool_call_id": None,
                        "origin_conversation_id": f"agent:{conv}" if m == 5 else None,
                        "created_at": at, "ingested_at": at, "session_seq": 1})
                    out["consolidation_ledger"].append({
                        "tenant_id": t, "message_hash": f"{msg_id:064x}",
                        "conversation_id": conv, "event_id": event_id, "message_id": msg_id,
                        "closed_id": closed, "claimed_at": at})
                out["consolidation_run"].append({
                    "closed_id": closed, "tenant_id": t, "conversation_id": conv,
                    "user_id": user, "agent_id": agent, "provider": "mysql",
                    "long_memory": True, "status": "done", "judge": "rules",
                    "message_count": MESSAGES, "candidate_count": 3, "last_error": None,
                    "created_at": T0, "updated_at": T0, "finished_at": T0})
                out["consolidation_progress"].append({
                    "tenant_id": t, "conversation_id": conv, "claimed_until_id": msg_id,
                    "claimed_session_seq": 1, "updated_at": T0})
                for table in ("conversation_summary", "conversation_session",
                              "stale_history_mark"):
                    out[table].append({"tenant_id": t, "conversation_id": conv,
                                       **_conversation_columns(table, msg_id)})
                if c == 0:
                    out["pending_expiry"].append({
                        "closed_id": closed, "seq": 0, "tenant_id": t, "user_id": user,
                        "agent_id": agent, "provider": "mysql", "cube": "user_profile",
                        "memory_ids": "[]", "superseded_by": "1", "attempts": 1,
                        "next_attempt_at": T0, "last_error": None, "created_at": T0})
            for n in range(MEMORIES):
                mem_id += 1
                conv = f"{user}-c{n % CONVERSATIONS}"
                cube, owner = ("user_profile", user) if n % 2 == 0 else (f"agent_a{n % 4 // 2}", "")
                sid = scope(t, cube, owner)
                closed = f"{t}/{conv}#1"
                events = json.dumps([f"{conv}-m{n % MESSAGES}"])
                out["memory"].append({
                    "id": mem_id, "scope_id": sid, "tenant_id": t, "user_id": user,
                    "agent_id": "a0", "cube": cube, "type": "text", "scope": "user",
                    "kind": "fact", "importance": 0.5, "content": f"memory {mem_id}",
                    "source_event_ids": events, "session_key": closed, "seq": n,
                    "doc_len": 3, "content_hash": f"{mem_id:064x}", "event_time": T0,
                    "valid_from": T0, "valid_to": None, "superseded_by": None,
                    "created_at": T0, "updated_at": T0, "role": "user", "span_start": None,
                    "span_end": None})
                out["memory_term"] += [{"scope_id": sid, "term": f"w{w}-{rnd.randrange(200)}",
                                        "memory_id": mem_id, "tf": 1, "doc_len": 3}
                                       for w in range(3)]
                out["memory_embedding"].append({"scope_id": sid, "model": "m",
                                                "memory_id": mem_id, "dim": 2,
                                                "vector": b"\0" * 8})
                out["memory_origin"].append({
                    "tenant_id": t, "provider": "mysql", "memory_id": str(mem_id),
                    "cube": cube, "user_id": user, "agent_id": "a0", "conversation_id": conv,
                    "closed_id": closed, "event_time": T0, "written_at": T0,
                    "retired_at": None})
                out["consolidation_candidate"].append({
                    "closed_id": closed, "seq": n, "cand_hash": f"{mem_id:064x}", "cube": cube,
                    "kind": "fact", "type": "text", "scope": "user", "importance": 0.5,
                    "content": f"memory {mem_id}", "source_event_ids": events,
                    "event_time": T0, "action": "add", "expire_ids": None, "decider": "rules",
                    "reason": None, "write_started_at": T0, "memory_id": str(mem_id),
                    "written_at": T0, "expired_at": None, "user_id": user, "role": "user",
                    "span_start": None, "span_end": None})
                out["memory_search_log"].append({
                    "tenant_id": t, "user_id": user, "agent_id": "a0",
                    "created_at": T0 + timedelta(seconds=mem_id), "latency_ms": 1.0,
                    "results": 1, "provider": "mysql", "keyword_only": False,
                    "outcome": "ok"})
    for seq in range(1, 1001):
        t = TENANTS[seq % len(TENANTS)]
        out["erasure"].append({
            "seq": seq, "erasure_id": f"old-{seq}", "tenant_id": t, "target": "user",
            "subject": f"gone-{seq}", "reference": None, "cutoff": T0, "chat_offsets": "{}",
            "memory_cube": None, "memory_user_id": None, "memory_sources": None,
            "status": "done" if seq % 200 else "deleting", "requested_at": T0,
            "updated_at": T0, "finished_at": T0 if seq % 200 else None})
        out["erasure_count"] += [{"seq": seq, "store": s, "count": 1}
                                 for s in ("conversation_message", "memory")]
        out["erasure_fence"] += [{"seq": seq, "partition": p, "passed_at": T0}
                                 for p in range(4)]
        if not seq % 200:
            out["erasure_conversation"] += [{"seq": seq, "conversation_id": f"x{c}",
                                             "whole": True} for c in range(20)]
    return out


def _conversation_columns(table: str, n: int) -> dict[str, Any]:
    if table == "conversation_summary":
        return {"summary": "s", "covered_until_id": 1, "covered_count": 1, "token_count": 1,
                "updated_at": T0 - OLD * (n % 49 == 0)}
    if table == "conversation_session":
        return {"last_closed_seq": 1, "updated_at": T0}
    return {"mark_id": 1, "marked_at": T0}


async def fill(engine: AsyncEngine) -> None:
    rows = _rows()
    async with engine.begin() as conn:
        for table in metadata.sorted_tables:
            batch = rows.get(table.name) or []
            known = set(table.c.keys())
            stmt = insert(table)
            if table.name == "memory_embedding":  # aiomysql cannot send bytes in a batch
                stmt = stmt.values(vector=func.unhex(bindparam("vector_hex")))
                batch = [{**{k: v for k, v in r.items() if k != "vector"},
                          "vector_hex": r["vector"].hex()} for r in batch]
                known.add("vector_hex")
            for i in range(0, len(batch), 2000):
                await conn.execute(stmt, [{k: v for k, v in r.items() if k in known}
                                          for r in batch[i: i + 2000]])
    async with engine.connect() as conn:
        for table in metadata.sorted_tables:
            await conn.execute(text(f"ANALYZE TABLE `{table.name}`"))


# ------------------------------------------------------------ the EXPLAINs
@dataclass
class Plans:
    """Every statement seen and, for those whose plan reads a table whole, the plan."""

    statements: int = 0
    scans: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)
    tables: set[str] = field(default_factory=set)

    def report(self) -> str:
        """Each statement that scans once (the first plan seen), how often it ran."""
        seen: dict[str, tuple[int, list[dict[str, Any]]]] = {}
        for sql, rows in self.scans:
            n, first = seen.get(sql, (0, rows))
            seen[sql] = (n + 1, first)
        return "\n\n".join(f"({n}x) {sql[:700]}\n  -> " + "\n  -> ".join(
            f"{r['table']}: type={r['type']} key={r['key']} rows={r['rows']} {r['Extra'] or ''}"
            for r in rows) for sql, (n, rows) in seen.items())


EXPLAINED = ("SELECT", "DELETE", "UPDATE", "INSERT INTO", "WITH")


@contextmanager
def explaining(engine: AsyncEngine) -> Iterator[Plans]:
    """EXPLAIN each statement ``engine`` runs, on its cursor's connection, before it runs."""
    plans = Plans()

    def before(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any,
               executemany: bool) -> None:
        head = statement.lstrip().upper()
        if executemany or not head.startswith(EXPLAINED) or (
                head.startswith("INSERT INTO") and "SELECT" not in head):
            return
        if "GET_LOCK" in head or "RELEASE_LOCK" in head or "IS_USED_LOCK" in head:
            return
        plans.statements += 1
        raw = conn.connection.dbapi_connection
        explain = raw.cursor()
        try:
            explain.execute("EXPLAIN " + statement, parameters)
            names = [d[0] for d in explain.description]
            rows = [dict(zip(names, r, strict=True)) for r in explain.fetchall()]
        finally:
            explain.close()
        plans.tables |= {str(r["table"]) for r in rows if r["table"]}
        full = [r for r in rows if r["type"] in FULL_SCANS
                and not str(r["table"] or "").startswith("<")]  # derived / materialized
        if full:
            plans.scans.append((statement, rows))

    event.listen(engine.sync_engine, "before_cursor_execute", before)
    try:
        yield plans
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", before)


# ------------------------------------------------------------ the erasures
class Erasures:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.builtin = BuiltinProvider(engine)
        self.registry = ErasureRegistry(TableErasureLog(engine))
        self.cache = InMemoryHotCopy()
        parts = FakeParts(engine=engine, store=MessageStore(engine), cache=self.cache,
                          providers=ProviderRegistry({"mysql": ProviderHandle(
                              "mysql", self.builtin, atomic_batch=True, episodes=True,
                              idempotent_add=True)}), models=ModelFactory(None, None))
        settings = settings_for_tests(erasure={"chunk_rows": 50, "message_retention_days": 30,
                                               "summary_retention_days": 30})
        w = wiring(parts, publisher=FencePassingPublisher(self.registry.log, datetime.now(UTC)),
                   settings=settings, agent_configs=StaticAgentConfigs({}), clock=lambda: NOW)
        w.erasures = self.registry
        self.wiring = w
        self.processor = w.erasure_processor(self.offsets, 4)
        self.executor = self.processor.executor

    @staticmethod
    async def offsets() -> dict[int, int]:
        return {0: 100, 1: 100}

    async def run_all(self) -> None:
        await self.registry.refresh()
        await self.registry.log.unfinished()  # type: ignore[attr-defined]
        await ConversationReads(self.engine).whole_conversations(200)
        requests = [
            {"target": "user", "user_id": "u1"},
            {"target": "conversation", "conversation_id": "u2-c1"},
            {"target": "conversation", "conversation_id": "agent:u3-c0"},
            {"target": "memory", "memory_id": await self._a_memory("bg01", "u4")},
            {"target": "tenant"},
        ]
        for i, fields in enumerate(requests):
            tenant = "bg00" if fields["target"] == "tenant" else "bg01"
            for dry in (True, False):
                req = ErasureRequest.model_validate({"erasure_id": f"e-{i}-{dry}",
                                                     "tenant_id": tenant, "dry_run": dry,
                                                     **fields})
                if dry:
                    await self.executor.dry_run(req)
                else:
                    receipt = await self.executor.erase(req)
                    assert receipt.status == "done" and receipt.counts, receipt
        await self.registry.refresh()
        await self.wiring.retention().run()

    async def _a_memory(self, tenant: str, user: str) -> str:
        async with self.engine.connect() as conn:
            return str((await conn.execute(text(
                "SELECT MIN(id) FROM memory WHERE tenant_id = :t AND user_id = :u"),
                {"t": tenant, "u": user})).scalar_one())


@pytest.fixture
async def database() -> AsyncIterator[tuple[str, AsyncEngine]]:
    name = unique("ms_explain")
    url = await migrated_database(name)
    engine = create_engine(DatabaseSettings(url=SecretStr(url)))
    await fill(engine)
    yield name, engine
    await engine.dispose()
    drop_database(name)


def scanned_tables(plans: Plans) -> set[str]:
    return {str(r["table"]) for _, rows in plans.scans for r in rows
            if r["type"] in FULL_SCANS and not str(r["table"]).startswith("<")}


async def test_no_statement_of_an_erasure_reads_a_table_whole(
        database: tuple[str, AsyncEngine]) -> None:
    _, engine = database
    with explaining(engine) as plans:
        await Erasures(engine).run_all()
    assert plans.statements > 100
    erased = {"conversation_message", "memory", "memory_term", "memory_embedding",
              "consolidation_run", "consolidation_candidate", "consolidation_ledger",
              "memory_origin", "memory_search_log", "reprocess_job", "erasure"}
    assert erased <= plans.tables  # every table was reached
    assert not plans.scans, f"{len(plans.scans)} statements read a table whole:\n" \
                            + plans.report()


async def test_without_the_migrations_indexes_the_scans_are_seen(
        database: tuple[str, AsyncEngine]) -> None:
    name, engine = database
    m = _migration()
    mysql_cli(";".join(f"DROP INDEX {m.index_name(t, c)} ON {t}" for t, c in m.INDEXES),
              database=name)
    with explaining(engine) as plans:
        await Erasures(engine).run_all()
    scanned = scanned_tables(plans)
    assert {"consolidation_run", "pending_expiry", "reprocess_job", "memory_embedding",
            "erasure"} <= scanned, sorted(scanned)

