"""The disturbed phase's erasures, sent from the outside while the faults go on, and
what is read back about them once the phase settled.

:class:`ErasureDriver` sends each :class:`~tests.chaos.subjects.PlannedErasure`
through :class:`~streams.client.MemoryClient` (the public erasure contract)
when its share of the workload has been published:

* an erasure of one memory first waits for the memory to exist (the episode of
  its event, in its user's cube) and erases it by the id a reply would give;
* an aimed erasure waits, a bounded time, until the run it aims at is seen
  unfinished in the database (a consolidation in flight), then is sent at once.

After the phase settled, :func:`after_erasure` asks every erased user, and
every group-chat speaker left, one query on every partition of the queries
topic (so every worker answers) and reads every table with a user or
conversation column for rows of an erased subject.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import func, select

from streams.adapters.db.schema.all_tables import metadata
from streams.adapters.db.schema.memory import memory, memory_scope_stats
from streams.client import MemoryClient
from streams.clock import naive_utc_now
from streams.wire.query import MemoryQuery
from tests.chaos.observe import Observer
from tests.chaos.snapshot import MemoryRow
from tests.chaos.subjects import PlannedErasure
from tests.chaos.traffic import Timeline
from tests.chaos.workload import Workload
from tests.integration.erasure_support import ERASURE_TABLES, partition_keys
from tests.support.services import KAFKA_BOOTSTRAP

MEMORY_WAIT_S = 180.0  # for the erased episode to exist
AIM_WAIT_S = 150.0  # for the aimed run to be seen in flight (faults may delay it)
RECEIPT_TIMEOUT_S = 300.0
POLL_S = 0.05
# a user's activity after their erasure is new (queries asked since): rows of these
# tables count only when made before the erasure was sent (their wall-clock column)
ACTIVITY = {"memory_search_log": "created_at"}


@dataclass
class ErasureOutcome:
    planned: PlannedErasure
    status: str = "not sent"  # the receipt's status, or why there is none
    memory: MemoryRow | None = None  # the erased memory, for a memory erasure
    note: str = ""
    sent_at: datetime | None = None  # naive UTC, as the database keeps times


@dataclass
class AfterErasure:
    """Read once the phase settled."""

    replies: dict[str, list[str]] = field(default_factory=dict)  # who asked -> sources seen
    leftovers: dict[str, int] = field(default_factory=dict)  # "table (subject)" -> rows


class ErasureDriver:
    def __init__(self, plan: Sequence[PlannedErasure], *, erasures_topic: str,
                 reply_topic: str, observer: Observer, timeline: Timeline) -> None:
        self.plan = list(plan)
        self.erasures_topic = erasures_topic
        self.reply_topic = reply_topic
        self.observer = observer
        self.timeline = timeline
        self.outcomes = [ErasureOutcome(p) for p in self.plan]

    async def run(self) -> None:
        async with MemoryClient(KAFKA_BOOTSTRAP, erasures_topic=self.erasures_topic,
                                reply_topic=self.reply_topic, reply_partitions=1) as client:
            await asyncio.gather(*(self._one(client, i, o) for i, o in enumerate(self.outcomes)))

    async def _one(self, client: MemoryClient, i: int, out: ErasureOutcome) -> None:
        p = out.planned
        await self.timeline.reached(p.at)
        subject = p.subject
        if p.target == "memory":
            out.memory = await self._episode(p.tenant, p.subject)
            if out.memory is None:
                out.status = f"not sent: no episode of {p.subject} within {MEMORY_WAIT_S:.0f}s"
                self.timeline.note(f"{p.describe()}: {out.status}")
                return
            subject = out.memory.id
        if p.aim is not None:
            out.note = await self._aim(p.aim)
        self.timeline.note(f"{p.describe()}: sent{out.note}")
        out.sent_at = naive_utc_now()
        try:
            receipt = await client.erase(
                tenant_id=p.tenant, target=p.target, erasure_id=f"chaos-{i}",
                user_id=subject if p.target == "user" else None,
                conversation_id=subject if p.target == "conversation" else None,
                memory_id=subject if p.target == "memory" else None,
                timeout_s=RECEIPT_TIMEOUT_S)
            out.status = receipt.status + (f" ({receipt.error.code})" if receipt.error else "")
        except Exception as exc:  # no receipt: a finding of the run
            out.status = f"no receipt: {type(exc).__name__}: {exc}"
        self.timeline.note(f"{p.describe()}: {out.status}")

    async def _aim(self, closed_id: str) -> str:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + AIM_WAIT_S
        while loop.time() < deadline:
            try:
                if closed_id in await self.observer.unfinished_runs():
                    return f" (run {closed_id} in flight)"
            except Exception:  # the database restarting: look again
                pass
            await asyncio.sleep(POLL_S)
        return f" (run {closed_id} not seen in flight within {AIM_WAIT_S:.0f}s)"

    async def _episode(self, tenant: str, event_id: str) -> MemoryRow | None:
        mem, scope = memory.c, memory_scope_stats.c
        q = (select(mem.id, mem.tenant_id, mem.cube, scope.owner_id, mem.kind, mem.type,
                    mem.content, mem.source_event_ids)
             .join(memory_scope_stats, scope.id == mem.scope_id)
             .where(mem.tenant_id == tenant, mem.kind == "episode", mem.valid_to.is_(None),
                    mem.cube == "user_profile",
                    func.json_contains(mem.source_event_ids, json.dumps(event_id))))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + MEMORY_WAIT_S
        while loop.time() < deadline:
            try:
                async with self.observer.engine().connect() as conn:
                    x = (await conn.execute(q)).first()
                if x is not None:
                    return MemoryRow(x.tenant_id, x.cube, x.owner_id, x.kind, x.type, x.content,
                                     tuple(json.loads(x.source_event_ids)), str(x.id))
            except Exception:  # the database restarting: look again
                pass
            await asyncio.sleep(0.5)
        return None


async def after_erasure(w: Workload, observer: Observer, queries_topic: str, reply_topic: str,
                        partitions: int, outcomes: Sequence[ErasureOutcome]) -> AfterErasure:
    out = AfterErasure(leftovers=await _leftovers(observer, outcomes))
    erased_users = {(e.tenant, e.subject) for e in w.erasures if e.target == "user"}
    askers = set(erased_users) | {(c.tenant, s) for c in w.conversations for s in c.speakers}
    agent = {(m.conversation.tenant, m.user): m.conversation.agent for m in w.messages}
    async with MemoryClient(KAFKA_BOOTSTRAP, request_topic=queries_topic,
                            reply_topic=reply_topic, reply_partitions=1, timeout_s=30) as client:
        for tenant, user in sorted(askers):
            body = MemoryQuery.model_validate({
                "tenant_id": tenant, "user_id": user, "agent_id": agent[(tenant, user)],
                "message": "Where do I live, what is my job and what did we talk about?",
                "options": {"timeout_ms": 30000, "top_k": 50}}).model_dump_json(
                    exclude_none=True).encode()
            seen: list[str] = []
            for key in partition_keys(f"{tenant}/{user}", partitions):
                reply = await client.send_raw(body, key=key, timeout_s=30)
                seen += [e for m in reply.memories for e in m.source_event_ids]
                seen += [f"error:{reply.error.code}"] if reply.error else []
            out.replies[f"{tenant}/{user}"] = seen
    return out


async def _leftovers(observer: Observer, outcomes: Sequence[ErasureOutcome]) -> dict[str, int]:
    """Rows of every table (with a tenant) naming an erased user or conversation."""
    found: dict[str, int] = {}
    async with observer.engine().connect() as conn:
        for table in metadata.sorted_tables:
            if table.name in ERASURE_TABLES or "tenant_id" not in table.c:
                continue
            for o in outcomes:
                e = o.planned
                column = {"user": "user_id", "conversation": "conversation_id"}.get(e.target)
                if column is None or column not in table.c:
                    continue
                where = [table.c.tenant_id == e.tenant, table.c[column] == e.subject]
                if (when := ACTIVITY.get(table.name)) is not None and o.sent_at is not None:
                    where.append(table.c[when] < o.sent_at)
                n = (await conn.execute(
                    select(func.count()).select_from(table).where(*where))).scalar_one()
                if n:
                    found[f"{table.name} ({e.tenant}/{e.subject})"] = int(n)
    return found
