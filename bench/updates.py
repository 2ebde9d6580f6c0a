"""Updates benchmark: does a correction replace the fact it corrects, and nothing else?

A generated workload (:mod:`updates_workload`: seeded; seven subjects, English
and Chinese, many phrasings, about a third held out while the rules were
written) goes through the worker's consolidation pipeline and processor, built
by the composition root (``Wiring``), on the built-in provider over a fresh
SQLite database, fed from memory (no Kafka, no services). Two runs:

(a) the rule judge and the rule conflict decisions;
(b) a model configured: the fake OpenAI-compatible server of the tests, whose
    judge extracts every statement of the workload as said, and whose conflict
    answers follow the workload's truth (supersede exactly the fact a correction
    corrects, when the prompt shows it). With a model the decisions are the
    model's; what memstream controls, and what run (b) measures, is that the
    judged memories reach the cube and that the conflict lookup shows the model
    the memory to replace.

A correction is **recalled** when every fact stored from the original statement
was retired and superseded by a memory of the correction. A **wrong supersede**
is any retired memory that is not such a fact (a non-correction that replaced
the fact, or a correction that replaced another subject's fact).

    python bench/updates.py [--users 400] [--split all|dev|held-out] [--no-model]
                            [--misses N]

Ends by printing one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import SecretStr
from sqlalchemy import text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from updates_workload import Case, Workload, build  # noqa: E402

from streams.adapters.db.messages import MessageStore, message_row  # noqa: E402
from streams.memory.agent_configs import StaticAgentConfigs  # noqa: E402
from streams.settings import DatabaseSettings, LLMSettings, RedisSettings, Settings  # noqa: E402
from streams.wire.envelope import Outgoing, SourceRecord  # noqa: E402
from streams.wire.records import ChatMessage, SessionClosed  # noqa: E402
from streams.worker.runtime import Runtime  # noqa: E402
from streams.worker.wiring import Wiring  # noqa: E402
from tests.fakes import model_prompts as prompts  # noqa: E402
from tests.fakes.openai import FakeOpenAI  # noqa: E402

TENANT, AGENT = "bench", "agent-1"


class Collect:
    def __init__(self) -> None:
        self.sent: list[Outgoing] = []

    async def publish(self, records: Sequence[Outgoing]) -> None:
        self.sent.extend(records)


def _records(w: Workload) -> list[list[SourceRecord]]:
    """Session ends in waves of one session number each: a user's sessions are
    consolidated in order, never two of them at the same time."""
    by_conv: dict[str, list[Any]] = defaultdict(list)
    for m in w.messages:
        by_conv[m.conversation].append(m)
    waves: dict[str, list[SourceRecord]] = defaultdict(list)
    for i, (user, conv, last) in enumerate(w.sessions):
        msgs = by_conv[conv]
        closed = SessionClosed(
            closed_id=f"{TENANT}/{conv}#1", tenant_id=TENANT, user_id=user, agent_id=AGENT,
            conversation_id=conv, trigger="explicit", session_seq=1,
            closed_at=datetime.now(UTC) + timedelta(seconds=60),
            last_activity=msgs[-1].created_at, message_count=len(msgs), last_event_id=last)
        waves[conv.rsplit("-", 1)[1]].append(SourceRecord(
            "memory.session-closed", 0, i, conv.encode(), closed.model_dump_json().encode()))
    return [waves[k] for k in sorted(waves)]


async def consolidate(settings: Settings, w: Workload) -> dict[str, Any]:
    runtime = await Runtime(settings, migrate=True).start()
    try:
        now = datetime.now(UTC)
        rows = [message_row(ChatMessage(
            event_id=m.event_id, type="message", tenant_id=TENANT, user_id=m.user,
            agent_id=AGENT, conversation_id=m.conversation, role=m.role, content=m.content,
            created_at=m.created_at), now) for m in w.messages]
        store = MessageStore(runtime.engine)
        for i in range(0, len(rows), 1000):
            await store.store(rows[i:i + 1000])
        parts = Wiring(settings, runtime, publisher=Collect(),
                       agent_configs=StaticAgentConfigs()).consolidation()
        batch = settings.consolidation.max_pending
        outcomes: Counter[str] = Counter()
        started = time.perf_counter()
        for wave in _records(w):
            for i in range(0, len(wave), batch):
                for handled in await parts.processor.process(wave[i:i + batch]):
                    outcomes[handled.outcome] += 1
        elapsed = time.perf_counter() - started
        async with runtime.engine.connect() as conn:
            memories = [dict(r._mapping) for r in await conn.execute(text(
                "SELECT id, kind, cube, content, source_event_ids, valid_to, superseded_by "
                "FROM memory"))]
        return {"elapsed_s": elapsed, "outcomes": dict(outcomes), "memories": memories}
    finally:
        await runtime.stop()


# --- the fake model -------------------------------------------------------------

def fake_model(w: Workload, purposes: Counter[str]) -> FakeOpenAI:
    statements = {c.fact_text for c in w.cases} | {c.later_text for c in w.cases}
    replaces = {(c.later_text, c.fact_text) for c in w.cases if c.kind == "correction"}

    def answer(body: dict[str, Any]) -> str:
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        if system.startswith(prompts.JUDGE):
            purposes["judge"] += 1
            return prompts.judged([(n, t) for n, t in prompts.new_user_lines(user)
                                   if t in statements])
        if system.startswith(prompts.CONFLICT):
            purposes["conflict"] += 1
            decisions = []
            for new in prompts.new_memories(user):
                expire = [i for i, old in new.stored if (new.content, old) in replaces]
                same = [i for i, old in new.stored if old == new.content]
                decisions.append((new.index, "supersede" if expire else "skip" if same
                                  else "store", expire))
            return prompts.decided(decisions)
        purposes["summary"] += 1
        return "The user talked about home, work, food, family, pets and tastes."

    return FakeOpenAI(handler=answer)


# --- scoring ---------------------------------------------------------------------

def score(w: Workload, memories: list[dict[str, Any]], split: str,
          misses: int) -> dict[str, Any]:
    facts_of: dict[str, set[str]] = defaultdict(set)  # event id -> fact ids
    for m in memories:
        if m["kind"] == "fact":
            for e in json.loads(m["source_event_ids"] or "[]"):
                facts_of[e].add(str(m["id"]))
    by_id = {str(m["id"]): m for m in memories}
    case_of_later = {e: c for c in w.cases for e in [c.later_event]}
    right: set[str] = set()
    table: dict[tuple[str, ...], Counter[str]] = defaultdict(Counter)
    missed: list[str] = []

    def count(c: Case, key: str) -> None:
        for k in (("all",), ("held-out" if c.held_out else "dev",), ("subject", c.subject),
                  ("template", c.subject, c.template, "*" if c.held_out else "")):
            table[k][key] += 1

    for c in w.cases:
        if split != "all" and c.held_out != (split == "held-out"):
            continue
        old, new = facts_of[c.fact_event], facts_of[c.later_event]
        count(c, c.kind)
        if not old:
            count(c, "fact_not_stored")
        if c.kind != "correction":
            continue
        ok = bool(old) and all(by_id[i]["valid_to"] is not None
                               and str(by_id[i]["superseded_by"]) in new for i in old)
        if ok:
            right |= old
            count(c, "recalled")
        elif len(missed) < misses:
            missed.append(f"{c.subject} {c.template}: {c.fact_text!r} -> {c.later_text!r}"
                          f" (fact stored: {bool(old)}, correction stored: {bool(new)})")
    wrong: list[str] = []
    for m in memories:
        if m["valid_to"] is None or str(m["id"]) in right:
            continue
        by = by_id.get(str(m["superseded_by"]))
        sources = json.loads(by["source_event_ids"]) if by else []
        c = next((case_of_later[e] for e in sources if e in case_of_later), None)
        if c is None:  # replaced by a first statement or small talk
            if split != "all":
                continue
            table[("all",)]["wrong"] += 1
        elif split != "all" and c.held_out != (split == "held-out"):
            continue
        else:
            count(c, "wrong")
        if len(wrong) < misses:
            what = f"{c.subject} {c.template}" if c else "-"
            wrong.append(f"{what}: {m['content']!r} replaced by "
                         f"{by['content'] if by else None!r}")

    def figures(k: tuple[str, ...]) -> dict[str, Any]:
        t = table[k]
        n = t["correction"]
        return {"corrections": n, "recalled": t["recalled"],
                "recall": round(100 * t["recalled"] / n, 1) if n else None,
                "others": t["other"], "wrong_supersedes": t["wrong"],
                "fact_not_stored": t["fact_not_stored"]}

    out = {name: figures((name,)) for name in ("all", "dev", "held-out") if (name,) in table}
    out["by_subject"] = {k[1]: figures(k) for k in sorted(table) if k[0] == "subject"}
    out["by_template"] = {f"{k[1]} {k[2]}{k[3]}": figures(k)
                          for k in sorted(table) if k[0] == "template"}
    out["misses"], out["wrong"] = missed, wrong
    return out


def show(title: str, s: dict[str, Any]) -> None:
    print(f"\n== {title}", file=sys.stderr)
    for key in ("all", "dev", "held-out"):
        if key in s:
            print(f"  {key:9} {s[key]}", file=sys.stderr)
    for name, f in {**s["by_subject"], **s["by_template"]}.items():
        print(f"  {name:36} recall {f['recalled']:3}/{f['corrections']:<3} "
              f"wrong {f['wrong_supersedes']:2} (of {f['others']} others) "
              f"fact not stored {f['fact_not_stored']}", file=sys.stderr)
    for line in s["misses"] + s["wrong"]:
        print("   ", line, file=sys.stderr)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    w = build(args.users, seed=args.seed)
    print(f"{len(w.cases)} cases, {len(w.sessions)} sessions, {len(w.messages)} messages",
          file=sys.stderr)
    out: dict[str, Any] = {"users": args.users, "seed": args.seed, "cases": len(w.cases),
                           "sessions": len(w.sessions), "split": args.split}
    runs = [("rules", None)] + ([] if args.no_model else [("model", "fake")])
    for name, model in runs:
        with tempfile.TemporaryDirectory() as tmp:
            url = SecretStr(f"sqlite+aiosqlite:///{Path(tmp) / 'updates.db'}")
            purposes: Counter[str] = Counter()
            if model is None:
                result = await consolidate(Settings(database=DatabaseSettings(url=url),
                                                    redis=RedisSettings(url=None)), w)
            else:
                with fake_model(w, purposes) as llm:
                    result = await consolidate(Settings(
                        database=DatabaseSettings(url=url), redis=RedisSettings(url=None),
                        llm=LLMSettings(base_url=llm.base_url, model="bench")), w)
        s = score(w, result["memories"], args.split, args.misses)
        show(f"{name} ({result['elapsed_s']:.1f} s)", s)
        out[name] = {k: v for k, v in s.items() if k not in ("misses", "wrong")}
        out[name]["sessions_per_s"] = round(len(w.sessions) / result["elapsed_s"], 1)
        out[name]["model_calls"] = dict(purposes)
    out["machine"] = (f"{platform.machine()} {os.cpu_count()} cpu, "
                      f"Python {platform.python_version()}")
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--users", type=int, default=400)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--split", choices=("all", "dev", "held-out"), default="all",
                    help="which phrasings to score (held-out ones were not looked at while "
                    "the rules were written)")
    ap.add_argument("--no-model", action="store_true", help="the rule judge only")
    ap.add_argument("--misses", type=int, default=0,
                    help="print this many missed corrections and wrong supersedes")
    print(json.dumps(asyncio.run(main(ap.parse_args())), ensure_ascii=False))
