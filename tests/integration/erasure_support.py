"""Looking at a stack from the outside after an erasure: rows per table, Redis keys,
the sessions changelog, replies from every worker."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table

from streams.adapters.db.schema.all_tables import metadata
from streams.adapters.kafka.partitioning import java_partition
from streams.client import MemoryClient
from streams.wire.query import MemoryQuery, MemoryReply
from tests.integration.conftest import Stack
from tests.integration.consolidation_support import memstream

# they hold who was erased (never what) and the ids of events erased past the cutoff,
# by design
ERASURE_TABLES = {"erasure", "erasure_count", "erasure_fence", "erased_event"}


def _quoted(values: Sequence[str]) -> str:
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values) or "''"


def subject_rows(stack: Stack, tenant: str, *, user: str | None = None,
                 conversations: Sequence[str] = (),
                 memory_ids: Sequence[str] = ()) -> dict[str, int]:
    """Rows of every table of the schema that belong to the subject: by tenant and user,
    by conversation, by a run of those conversations, by memory id; orphaned postings
    and vectors too. Tables with nothing of it are left out."""
    out: dict[str, int] = {}
    convs = _quoted(conversations)
    runs = (f"SELECT closed_id FROM consolidation_run WHERE tenant_id = '{tenant}' AND "
            f"(conversation_id IN ({convs})"
            + (f" OR user_id = '{user}'" if user else "") + ")")
    for table in metadata.sorted_tables:
        if table.name in ERASURE_TABLES:
            continue
        where = _where(table, tenant, user, conversations, memory_ids, runs)
        if where:
            n = int(stack.sql(f"SELECT COUNT(*) FROM {table.name} WHERE {where}")[0][0])
            if n:
                out[table.name] = n
    for table, key in (("memory_term", "memory_id"), ("memory_embedding", "memory_id")):
        n = int(stack.sql(f"SELECT COUNT(*) FROM {table} WHERE {key} NOT IN "
                          "(SELECT id FROM memory)")[0][0])
        if n:
            out[f"{table} (orphaned)"] = n
    return out


def _where(table: Table, tenant: str, user: str | None, conversations: Sequence[str],
           memory_ids: Sequence[str], runs: str) -> str:
    c = table.c
    parts = []
    mine = f"tenant_id = '{tenant}'" if "tenant_id" in c else None
    if user and "user_id" in c:
        parts.append(f"user_id = '{user}'" + (f" AND {mine}" if mine else
                                              f" AND closed_id IN ({runs})"
                                              if "closed_id" in c else ""))
    if conversations and "conversation_id" in c and mine:
        parts.append(f"{mine} AND conversation_id IN ({_quoted(conversations)})")
    if "closed_id" in c and table.name != "consolidation_run":
        parts.append(f"closed_id IN ({runs})")
    if memory_ids and "memory_id" in c and table.name not in ("memory_term", "memory_embedding"):
        parts.append(f"memory_id IN ({_quoted(memory_ids)})")
    if memory_ids and table.name == "memory":
        parts.append(f"id IN ({_quoted(memory_ids)})")
    if table.name == "memory_scope_stats" and user:
        parts.append(f"tenant_id = '{tenant}' AND cube = 'user_profile' AND owner_id = '{user}'")
    return " OR ".join(f"({p})" for p in parts)


def tenant_rows(stack: Stack, tenant: str) -> dict[str, int]:
    """Rows of every table with a tenant column that belong to ``tenant``."""
    out = {}
    for table in metadata.sorted_tables:
        if "tenant_id" in table.c and table.name not in ERASURE_TABLES:
            n = int(stack.sql(f"SELECT COUNT(*) FROM {table.name} "
                              f"WHERE tenant_id = '{tenant}'")[0][0])
            out[table.name] = n
    return out


async def redis_keys(stack: Stack, tenant: str, conversation: str | None = None) -> list[str]:
    r = stack.redis()
    try:
        tag = f"{{{tenant}:{conversation}}}" if conversation else f"{{{tenant}:"
        keys = [k.decode() async for k in r.scan_iter(match=f"{stack.name}:{tag}*", count=1000)]
        return sorted(keys)
    finally:
        await r.aclose()


async def changelog(stack: Stack, app_id: str | None = None) -> dict[str, Any]:
    """The sessions changelog, compacted by hand: the last value of each key (None: a
    tombstone)."""
    records = await stack.read_topic(f"{app_id or stack.name}-sessions-changelog", timeout=20)
    last: dict[str, Any] = {}
    for r in records:
        key = json.loads(r.key) if r.key else None
        last[str(key)] = None if r.value is None else json.loads(r.value)
    return last


def partition_keys(prefix: str, partitions: int) -> list[bytes]:
    """One record key per partition of a topic of ``partitions``."""
    keys: dict[int, bytes] = {}
    i = 0
    while len(keys) < partitions:
        key = f"{prefix}/{i}".encode()
        keys.setdefault(java_partition(key, partitions), key)
        i += 1
    return [keys[p] for p in range(partitions)]


async def ask_every_worker(stack: Stack, *, tenant: str, user: str, agent: str = "a1",
                           conversation: str | None = None,
                           message: str = "Where do I live and what is my dog called?",
                           ) -> list[MemoryReply]:
    """The same query on every partition of the queries topic, so every worker of the
    query group answers it at least once."""
    body = MemoryQuery.model_validate({
        "tenant_id": tenant, "user_id": user, "agent_id": agent,
        "conversation_id": conversation, "message": message,
        "options": {"timeout_ms": 30000}}).model_dump_json(exclude_none=True).encode()
    async with MemoryClient(stack.env()["MEMSTREAM_KAFKA__BROKER"],
                            request_topic=stack.topics["queries"], timeout_s=30) as client:
        return [await client.send_raw(body, key=k, timeout_s=30)
                for k in partition_keys(f"{tenant}/{user}", stack.partitions)]


def erase(stack: Stack, *args: str, check: bool = True) -> dict[str, Any]:
    out = memstream(stack, "erase", "--quiet", "--timeout", "120", *args, check=check)
    doc: dict[str, Any] = json.loads(out.stdout) if out.stdout.strip() else {
        "stderr": out.stderr, "returncode": out.returncode}
    return doc
