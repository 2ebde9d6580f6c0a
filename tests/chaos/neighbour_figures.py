"""What one noisy-neighbour phase did, read from the outside: SQL, the dead-letter
and reply topics, the callers' own outcomes and the watchdog.

Percentiles are nearest-rank; a calm query not answered within its deadline
counts as infinitely slow, so a p99 is finite only when 99 % were answered in time.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import func, select, text

from streams.adapters.db.schema.consolidation import consolidation_run
from streams.adapters.db.schema.conversation import conversation_message
from streams.adapters.db.schema.memory import memory
from tests.chaos.observe import Observer
from tests.chaos.stolen import StolenTime
from tests.chaos.tenants import CALM, LOUD, CalmChat, Erasures
from tests.chaos.traffic import DeadlineClass
from tests.chaos.watchdog import RssWatchdog


def percentile(values: list[float], p: float) -> float:
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


@dataclass
class PhaseFigures:
    name: str
    settled: str = ""
    seconds: float = 0.0
    # calm's queries (1 s deadline)
    calm_queries: int = 0
    calm_late: int = 0
    calm_p50_ms: float = math.nan
    calm_p99_ms: float = math.nan
    # calm's replies by kind (tests.chaos.traffic.reply_kind): "ok", an error's code,
    # "degraded: …" — a refusal or a failed part is no answer, however quick
    calm_replies: dict[str, int] = field(default_factory=dict)
    # the slowest calm queries: "asked at s (from the phase's traffic start): ms", and the
    # CPU time the host stole from the machine, summed over its CPUs, in the samples
    # overlapping the query (tests.chaos.stolen: 50 ms each)
    calm_slowest_queries: list[str] = field(default_factory=list)
    # CPU seconds the host stole from the machine in the phase, over all its CPUs; how
    # many of calm's queries overlapped a sample with some stolen
    stolen_s: float = 0.0
    calm_queries_stolen: int = 0
    # calm's chat
    calm_sent: int = 0
    calm_stored: int = 0
    calm_duplicates: int = 0
    calm_sessions: int = 0
    calm_consolidated: int = 0
    calm_delay_p50_s: float = math.nan
    calm_delay_p95_s: float = math.nan
    calm_delay_max_s: float = math.nan
    # the slowest calm sessions: "closed id: session_end -> run begun s + run s"
    calm_slowest: list[str] = field(default_factory=list)
    # loud
    loud_sent: int = 0
    loud_stored: int = 0
    loud_runs: int = 0
    loud_runs_done: int = 0
    loud_claimed: int = 0  # messages the done runs consolidated
    loud_consolidation_s: float = math.nan  # first run of loud's begun -> last finished
    loud_memories: int = 0  # live memories of loud's (its cubes' size)
    loud_dead_letters: dict[str, int] = field(default_factory=dict)
    flood_sent: int = 0
    flood_answered: int = 0
    flood_over_quota: int = 0
    flood_other: dict[str, int] = field(default_factory=dict)
    flood_unanswered: int = 0  # dropped unanswered: waited past their timeout_ms (60 s)
    erasures_asked: int = 0
    erasure_receipts: dict[str, int] = field(default_factory=dict)
    # the worker
    rss_peak_mb: float = 0.0
    restarts: int = 0
    restart_reasons: list[str] = field(default_factory=list)
    timeline: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("timeline")
        return {k: (round(v, 3) if isinstance(v, float) and math.isfinite(v)
                    else None if isinstance(v, float) else v) for k, v in out.items()}


async def _sql(f: PhaseFigures, observer: Observer, calm: CalmChat) -> None:
    m, r, mem = conversation_message.c, consolidation_run.c, memory.c
    async with observer.engine().connect() as conn:
        ids = Counter(x.event_id for x in await conn.execute(
            select(m.event_id).where(m.tenant_id == CALM)))
        f.calm_stored = sum(1 for e in calm.sent if ids[e] >= 1)
        f.calm_duplicates = sum(n - 1 for n in ids.values() if n > 1)
        runs = {x.closed_id: (x.created_at, x.finished_at) for x in await conn.execute(
            select(r.closed_id, r.created_at, r.finished_at).where(
                r.tenant_id == CALM, r.status == "done"))}
        finished = {cid: done for cid, (_, done) in runs.items()}
        lags = {f"{CALM}/{_text(x.conversation_id)}#{x.session_seq}": float(x.lag)
                for x in await conn.execute(select(m.conversation_id, m.session_seq,
                   func.max(func.timestampdiff(text("MICROSECOND"), m.created_at,
                                               m.ingested_at) / 1e6).label("lag"))
            .where(m.tenant_id == CALM).group_by(m.conversation_id, m.session_seq))}
        f.loud_stored = int((await conn.execute(
            select(func.count()).where(m.tenant_id == LOUD))).scalar_one())
        for status, n, k in await conn.execute(
                select(r.status, func.count(), func.sum(r.message_count))
                .where(r.tenant_id == LOUD).group_by(r.status)):
            f.loud_runs += int(n)
            if status == "done":
                f.loud_runs_done, f.loud_claimed = int(n), int(k or 0)
        first, last = (await conn.execute(select(func.min(r.created_at), func.max(
            r.finished_at)).where(r.tenant_id == LOUD, r.status == "done"))).one()
        if first is not None and last is not None:
            f.loud_consolidation_s = (last - first).total_seconds()
        f.loud_memories = int((await conn.execute(select(func.count()).where(
            mem.tenant_id == LOUD, mem.valid_to.is_(None)))).scalar_one())
    delays = [(finished[cid] - at).total_seconds() for cid, at in calm.ended.items()
              if finished.get(cid) is not None]
    f.calm_sessions, f.calm_consolidated = len(calm.ended), len(delays)
    slowest = sorted((cid for cid in calm.ended if finished.get(cid) is not None),
                     key=lambda cid: finished[cid] - calm.ended[cid], reverse=True)[:5]
    f.calm_slowest = [f"{cid}: {(runs[cid][0] - calm.ended[cid]).total_seconds():.1f} + "
                      f"{(runs[cid][1] - runs[cid][0]).total_seconds():.1f} s, its last message "
                      f"stored {lags.get(cid, math.nan):.1f} s after it was sent"
                      for cid in slowest]
    if delays:
        f.calm_delay_p50_s = percentile(delays, 50)
        f.calm_delay_p95_s = percentile(delays, 95)
        f.calm_delay_max_s = max(delays)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def _topics(f: PhaseFigures, observer: Observer) -> None:
    reasons: Counter[str] = Counter()
    for value, headers in await observer.read_topic(observer.dlq_topic):
        try:
            tenant = json.loads(value or b"{}").get("tenant_id")
        except (ValueError, AttributeError):
            tenant = None
        if tenant == LOUD:
            reasons[next((v.decode() for k, v in headers if k == "memstream.error.reason"),
                         "?")] += 1
    f.loud_dead_letters = dict(reasons)
    other: Counter[str] = Counter()
    for value, _ in await observer.read_topic(observer.reply_topic):
        code = (json.loads(value or b"{}").get("error") or {}).get("code")
        if code is None:
            f.flood_answered += 1
        elif code == "over_quota":
            f.flood_over_quota += 1
        else:
            other[str(code)] += 1
    f.flood_other = dict(other)
    f.flood_unanswered = f.flood_sent - f.flood_answered - f.flood_over_quota - other.total()


async def read_figures(name: str, observer: Observer, calm: CalmChat, calls: DeadlineClass,
                       loud_sent: int, flood_sent: int, erasures: Erasures,
                       watchdog: RssWatchdog, started: float,
                       stolen: StolenTime) -> PhaseFigures:
    f = PhaseFigures(name, calm_sent=len(calm.sent), loud_sent=loud_sent,
                     flood_sent=flood_sent, erasures_asked=erasures.asked,
                     erasure_receipts=dict(erasures.receipts),
                     rss_peak_mb=watchdog.peak_mb, restarts=watchdog.restarts,
                     restart_reasons=list(watchdog.reasons))
    latencies = [o.latency_s * 1000 if o.answered else math.inf for _, o in calls.outcomes]
    f.calm_queries, f.calm_late = len(latencies), sum(1 for x in latencies if x == math.inf)
    f.calm_p50_ms, f.calm_p99_ms = percentile(latencies, 50), percentile(latencies, 99)
    f.calm_replies = dict(calls.replies)
    slowest = sorted(calls.outcomes, key=lambda x: -x[1].latency_s if x[1].answered
                     else -math.inf)[:5]
    f.calm_slowest_queries = [
        f"at {at - started:.1f} s: " + (f"{o.latency_s * 1000:.0f} ms" if o.answered
                                        else "not answered in time")
        + f" ({stolen.during(at, at + o.latency_s) * 1000:.0f} CPU ms stolen around it)"
        for at, o in slowest]
    f.stolen_s = stolen.total(started)
    f.calm_queries_stolen = sum(1 for at, o in calls.outcomes
                                if stolen.during(at, at + o.latency_s))
    await _sql(f, observer, calm)
    await _topics(f, observer)
    return f
