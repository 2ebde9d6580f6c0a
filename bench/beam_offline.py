"""BEAM in one process: the worker's consolidation and query engine, no broker.

The chats are stored and consolidated session by session by the composition
root's own processors (``Wiring`` over a ``Runtime``) on SQLite, with the
local embedder behind a vector cache on disk (``.bench/beam-vectors.sqlite``,
keyed by the text), then every question is answered by the worker's
``QueryEngine``. What the broker adds (transport, batching) does not change a
ranking, so this is how the ranking and the consolidation are tuned and
rotated; ``make bench-beam`` measures the same through Kafka.

    python bench/beam_offline.py [--data DIR] [--chats 1,2] [--rebuild] [--json]

The consolidated database is kept under ``.bench/beam-offline/`` keyed by the
data and the code of the consolidation (``streams/consolidation``,
``streams/memory``), so asking again after a ranking change reuses it.
``MEMSTREAM_*`` settings in the environment apply as they would to a worker.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from streams.memory.provider import ModelCaller

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pydantic import SecretStr  # noqa: E402

from streams.adapters.db.messages import MessageStore, message_row  # noqa: E402
from streams.adapters.embeddings.embedders import LocalEmbedder  # noqa: E402
from streams.devtools.beam.dataset import Chat, load_chats  # noqa: E402
from streams.devtools.beam.harness import as_reply  # noqa: E402
from streams.devtools.beam.scoring import Asked, render_table, score, summarize  # noqa: E402
from streams.devtools.locomo.rotation import rotate  # noqa: E402
from streams.memory.agent_configs import StaticAgentConfigs  # noqa: E402
from streams.settings import DatabaseSettings, RedisSettings, Settings  # noqa: E402
from streams.wire.envelope import SourceRecord  # noqa: E402
from streams.wire.query import MemoryQuery, QueryOptions  # noqa: E402
from streams.wire.records import ChatMessage, SessionClosed  # noqa: E402
from streams.worker.runtime import Runtime  # noqa: E402
from streams.worker.wiring import Wiring  # noqa: E402
from tests.agents.fakes import FakePublisher  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "bench" / "beam-100k"
TENANT, AGENT = "beam", "beam-agent"
CODE_DIRS = ("streams/consolidation", "streams/memory", "streams/adapters/db",
             "streams/tokens.py")


def user_of(chat_id: str) -> str:
    return f"beam-{chat_id}"


def event_of(chat_id: str, turn: int) -> str:
    return f"beam-{chat_id}:{turn}"


class CachedEmbedder(LocalEmbedder):
    """The local embedder with its vectors kept on disk, by the text's hash."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path)
        self.db.execute("CREATE TABLE IF NOT EXISTS v (h TEXT PRIMARY KEY, vec BLOB)")

    async def embed(self, texts: Sequence[str], *,
                    caller: ModelCaller | None = None) -> list[list[float]]:
        keys = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
        found: dict[str, list[float]] = {}
        for k in set(keys):
            row = self.db.execute("SELECT vec FROM v WHERE h = ?", (k,)).fetchone()
            if row is not None:
                found[k] = np.frombuffer(row[0], dtype=np.float32).tolist()
        missing = [(k, t) for k, t in zip(keys, texts, strict=True) if k not in found]
        if missing:
            wanted = list(dict((k, t) for k, t in missing).items())
            vecs = await super().embed([t for _, t in wanted])
            for (k, _), v in zip(wanted, vecs, strict=True):
                found[k] = v
                self.db.execute("INSERT OR REPLACE INTO v VALUES (?, ?)",
                                (k, np.asarray(v, dtype=np.float32).tobytes()))
            self.db.commit()
        return [found[k] for k in keys]


def code_digest(data: Path, chats: Sequence[str]) -> str:
    h = hashlib.sha256()
    for p in sorted(data.rglob("*.json")):
        h.update(p.name.encode())
        h.update(str(p.stat().st_size).encode())
    h.update(",".join(chats).encode())
    for key in sorted(k for k in os.environ if k.startswith("MEMSTREAM_")):
        h.update(f"{key}={os.environ[key]}".encode())  # settings change what is stored
    for name in CODE_DIRS:
        base = ROOT / name
        for f in sorted(base.rglob("*.py")) if base.is_dir() else [base]:
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def settings_for(db: Path) -> Settings:
    return Settings(database=DatabaseSettings(url=SecretStr(f"sqlite+aiosqlite:///{db}")),
                    redis=RedisSettings(url=None))


async def open_runtime(db: Path) -> tuple[Runtime, Wiring]:
    settings = settings_for(db)
    runtime = Runtime(settings, migrate=True)
    runtime.__dict__["embedder"] = CachedEmbedder(ROOT / ".bench" / "beam-vectors.sqlite")
    await runtime.start()
    wiring = Wiring(settings, runtime, publisher=FakePublisher(),
                    agent_configs=StaticAgentConfigs())
    return runtime, wiring


async def consolidate(chats: Sequence[Chat], db: Path) -> None:
    runtime, wiring = await open_runtime(db)
    try:
        consolidation = wiring.consolidation()
        store = MessageStore(runtime.engine)
        n = 0
        t0 = time.perf_counter()
        for chat in chats:
            user = user_of(chat.chat_id)
            conv = f"beam-{chat.chat_id}"
            for session in chat.sessions:
                if not session.turns:
                    continue
                start = session.start.replace(tzinfo=UTC)
                msgs = [ChatMessage(
                    event_id=event_of(chat.chat_id, t.id), type="message", tenant_id=TENANT,
                    user_id=user, agent_id=AGENT, conversation_id=conv, role=t.role,
                    content=t.content or "(no text)", created_at=start + timedelta(seconds=i))
                    for i, t in enumerate(session.turns)]
                await store.store([message_row(m, datetime.now(UTC), session_seq=session.number)
                                   for m in msgs])
                closed = SessionClosed(
                    closed_id=f"{TENANT}/{conv}#{session.number}", tenant_id=TENANT,
                    user_id=user, agent_id=AGENT, conversation_id=conv, trigger="explicit",
                    session_seq=session.number, closed_at=datetime.now(UTC) + timedelta(seconds=60),
                    last_activity=msgs[-1].created_at, message_count=len(msgs),
                    last_event_id=msgs[-1].event_id)
                n += 1
                [_handled] = await consolidation.processor.process([SourceRecord(
                    "closed", 0, n, conv.encode(), closed.model_dump_json().encode())])
                if n % 100 == 0:
                    print(f"  consolidated {n} sessions ({time.perf_counter() - t0:.0f} s)",
                          file=sys.stderr, flush=True)
        print(f"  consolidated {n} sessions in {time.perf_counter() - t0:.0f} s",
              file=sys.stderr, flush=True)
    finally:
        await runtime.stop()


# ------------------------------------------------------------------ scoring
def per_question(asked: Sequence[Asked]) -> list[dict[str, Any]]:
    """Each scored question's figures (``streams.devtools.beam.scoring``), for the grid."""
    out = []
    for a in asked:
        if a.reply is None:
            continue
        s = score(a.question, a.reply)
        if not s.has_evidence:
            continue
        row = {"chat": s.chat_id, "type": s.type, "b4k": s.b4k, "all": s.all_in,
               "r10": s.recall[10]}
        if s.ku is not None and not s.ku.skipped:
            row["ku"] = float(s.ku.above)
        out.append(row)
    return out


async def ask(chats: Sequence[Chat], db: Path, top_k: int, budget: int,
              dump: list[dict[str, Any]] | None = None) -> list[Asked]:
    runtime, wiring = await open_runtime(db)
    try:
        engine = wiring.query_processor().engine
        out = []
        for chat in chats:
            for n, q in enumerate(chat.questions):
                t0 = time.perf_counter()
                reply = await engine.answer(MemoryQuery(
                    tenant_id=TENANT, user_id=user_of(chat.chat_id), agent_id=AGENT,
                    conversation_id=f"beam-{chat.chat_id}-q{n}", message=q.question,
                    options=QueryOptions(include_short_term=False, top_k=top_k,
                                         long_memory_token_budget=budget, timeout_ms=60_000)))
                out.append(Asked(q, as_reply(reply), (time.perf_counter() - t0) * 1000, n + 1))
                if dump is not None:
                    dump.append({"chat": q.chat_id, "type": q.type, "question": q.question,
                                 "evidence": list(q.evidence),
                                 "reply": reply.model_dump(mode="json")})
        return out
    finally:
        await runtime.stop()


# ------------------------------------------------------------------ grid and rotation
GRID: dict[str, list[Any]] = {
    "dense": [0.5, 0.6],
    "neighbour": [0.3, 0.4, 0.5],
    "session": [0.4, 0.5],
    "assistant": [0.05, 0.1, 0.2, 0.3],
    "passage_decay": [0.05, 0.1, 0.2, 0.3],
    "relativity": [0.2, 0.3, 0.45],
    "ramp": ["0.2-0.4/0.05-0.3"],
    "recency": [10],
}
"""The weights shared with LoCoMo (dense, neighbour, session, relativity: the values
``bench/rotation.py``'s ``SHARED_WITH_BEAM`` tries too, so that ``bench/rotation_joint.py``
can choose them on both), and the weights only agent conversations have (an assistant's
turns, the passages of one answer)."""


def read_json(path: Path) -> dict[str, list[dict[str, Any]]]:
    return json.loads(path.read_text()) if path.exists() else {}


def write_json(path: Path, doc: dict[str, list[dict[str, Any]]]) -> None:
    path.write_text(json.dumps(doc))


def ramp_of(name: str) -> Any:
    from streams.memory.rules.fusion import Ramp
    if name == "off":
        return None
    d, lx = name.split("/")
    return Ramp(*map(float, d.split("-")), *map(float, lx.split("-")))


async def grid(chats: Sequence[Chat], db: Path, cache: Path, top_k: int,
               budget: int) -> dict[str, list[dict[str, Any]]]:
    import itertools
    from dataclasses import replace as dc_replace

    from streams.memory.rules.fusion import FusionWeights
    from streams.memory.rules.recency import Recency
    done = read_json(cache)
    runtime, wiring = await open_runtime(db)
    try:
        engine = wiring.query_processor().engine
        search = runtime.providers.get("mysql").provider._search  # type: ignore[attr-defined]
        base = engine.config
        keys = list(GRID)
        for values in itertools.product(*GRID.values()):
            p = dict(zip(keys, values, strict=True))
            name = json.dumps(p, sort_keys=True)
            if name in done:
                continue
            search.weights = FusionWeights(p["dense"], round(1 - p["dense"], 6), p["neighbour"],
                                           p["session"], 0.25, p["passage_decay"],
                                           p["assistant"])
            search.ramp = ramp_of(p["ramp"])
            search.recency = Recency(depth=p["recency"])
            engine.config = dc_replace(base, relativity=p["relativity"])
            asked = []
            for chat in chats:
                for n, q in enumerate(chat.questions):
                    if not q.evidence:
                        continue
                    reply = await engine.answer(MemoryQuery(
                        tenant_id=TENANT, user_id=user_of(chat.chat_id), agent_id=AGENT,
                        conversation_id=f"beam-{chat.chat_id}-q{n}", message=q.question,
                        options=QueryOptions(include_short_term=False, top_k=top_k,
                                             long_memory_token_budget=budget,
                                             timeout_ms=60_000)))
                    asked.append(Asked(q, as_reply(reply), 0.0, n + 1))
            done[name] = per_question(asked)
            if len(done) % 20 == 0:
                write_json(cache, done)
                print(f"  {len(done)} configurations", file=sys.stderr, flush=True)
        write_json(cache, done)
        return done
    finally:
        await runtime.stop()


def objective(rows: Sequence[dict[str, Any]]) -> float:
    return sum((r["b4k"] + r["all"] + r["r10"]) / 3 for r in rows) / max(len(rows), 1)


def _mean(rows: Sequence[dict[str, Any]], key: str) -> float:
    vals = [r[key] for r in rows if key in r]
    return 100 * sum(vals) / len(vals) if vals else 0.0


def rotation(done: dict[str, list[dict[str, Any]]]) -> str:
    """Leave one chat out (:func:`streams.devtools.locomo.rotation.rotate`): each fold's
    choice on the other chats, its figures on the held-out one, pooled, by type."""
    names = list(done)
    rows = [done[n] for n in names]
    groups = [r["chat"] for r in rows[0]]
    rot = rotate(range(len(names)), groups,
                 lambda c, idx: objective([rows[c][i] for i in idx]),
                 lambda c, idx: [rows[c][i] for i in idx])
    lines = [f"{'held out':<9} {'chosen on the others':<100} {'b4k':>6} {'all':>6} {'R@10':>6}"]
    for f in rot.folds:
        lines.append(f"{f.fold.held_out:<9} {names[f.chosen]:<100} "
                     + " ".join(f"{_mean(f.rows, k):>5.1f}%" for k in ("b4k", "all", "r10")))
    pooled = [r for _, r in rot.held_out_rows()]
    ku = [r["ku"] for r in pooled if "ku" in r]
    lines.append(f"{'pooled':<9} {'':<100} "
                 + " ".join(f"{_mean(pooled, k):>5.1f}%" for k in ("b4k", "all", "r10"))
                 + f"   updates above originals {sum(ku):.0f}/{len(ku)}")
    lines.append("pooled held-out, by type:")
    for t in sorted({r["type"] for r in pooled}):
        mine = [r for r in pooled if r["type"] == t]
        lines.append(f"  {t:<26} {len(mine):>3} "
                     + " ".join(f"{_mean(mine, k):>6.1f}%" for k in ("b4k", "all", "r10")))
    for key in json.loads(names[0]):
        chosen = Counter(str(json.loads(names[f.chosen])[key]) for f in rot.folds)
        lines.append(f"  {key}: chosen {dict(sorted(chosen.items()))}")
    dev = max(range(len(names)), key=lambda c: objective(rows[c]))
    lines.append(f"dev (tuned on all ten): {names[dev]} "
                 + " ".join(f"{k} {_mean(rows[dev], k):.1f}%" for k in ("b4k", "all", "r10")))
    return "\n".join(lines)


def grid_cache(data: Path, chats: Sequence[Chat]) -> Path:
    return ROOT / ".bench" / "beam-offline" / code_digest(data, [c.chat_id for c in chats])


def beam_grid_rows(data: Path) -> tuple[list[str], list[list[dict[str, Any]]]]:
    """Every configuration of the cached grid (of this build, all chats) and its rows."""
    done = read_json(grid_cache(data, load_chats(data)) / "grid.json")
    if not done:
        raise SystemExit("no BEAM grid of this build: run bench/beam_offline.py --grid first")
    return list(done), list(done.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--chats", default=None, help="comma-separated chat folders (default: all)")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--top-k", type=int, default=50)
    ap.add_argument("--budget", type=int, default=4000)
    ap.add_argument("--dump", type=Path, default=None, help="write every reply as JSON lines")
    ap.add_argument("--grid", action="store_true", help="every configuration of GRID, rotated")
    args = ap.parse_args()
    chats = load_chats(args.data)
    if args.chats:
        wanted = args.chats.split(",")
        chats = [c for c in chats if c.chat_id in wanted]
    db = grid_cache(args.data, chats) / "m.db"
    if args.rebuild and db.exists():
        db.unlink()
    if not db.exists():  # built under another name, so an interrupted run is never reused
        db.parent.mkdir(parents=True, exist_ok=True)
        partial = db.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        print(f"  consolidating into {db}", file=sys.stderr, flush=True)
        asyncio.run(consolidate(chats, partial))
        partial.rename(db)
    if args.grid:
        done = asyncio.run(grid(chats, db, db.parent / "grid.json", args.top_k, args.budget))
        print(rotation(done))
        return 0
    dumped: list[dict[str, Any]] = []
    asked = asyncio.run(ask(chats, db, args.top_k, args.budget, dumped))
    if args.dump:
        args.dump.write_text("".join(json.dumps(d) + "\n" for d in dumped))
    summary = summarize(asked)
    print(json.dumps(summary.as_json()) if args.json
          else render_table(summary, budget=args.budget, arrivals="in process, one at a time"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
