"""``make bench-query``: a finished run leaves neither its topics on the broker nor its
worker's Faust data directory under ``.bench/``, run after run; the BEAM shape
(``bench/beam_shape.py``) keeps memory ``i`` of a cube the same at every size, with
the roles, spans and sessions consolidation gives them, and a tiny ``--shape beam``
run of either mode ends with its JSON line."""

from __future__ import annotations

import asyncio
import importlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from tests.integration.conftest import create_topic
from tests.support.services import KAFKA_BOOTSTRAP, drop_database, unique

ROOT = Path(__file__).resolve().parents[2]


async def topics_named(marker: str) -> list[str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=KAFKA_BOOTSTRAP)
    await admin.start()
    try:
        return [t for t in await admin.list_topics() if marker in t]
    finally:
        await admin.close()


def test_a_finished_run_leaves_no_topic_and_no_data_directory() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        query = importlib.import_module("query")
    finally:
        sys.path.remove(str(ROOT / "bench"))
    run = unique("r")
    settings = query.run_settings(run, "sqlite+aiosqlite://", "none")
    data = Path(settings.kafka.data_dir)
    assert data == ROOT / ".bench" / f"qbench-{run}"
    (data / "tables").mkdir(parents=True)
    (data / "tables" / "offsets").write_text("7")
    asyncio.run(create_topic(f"qbench-{run}.queries", 1))
    assert asyncio.run(topics_named(run)) == [f"qbench-{run}.queries"]
    asyncio.run(query.forget_run(settings))
    assert not data.exists()
    for _ in range(50):  # deletion is asynchronous on the broker
        if not asyncio.run(topics_named(run)):
            break
        time.sleep(0.1)
    assert asyncio.run(topics_named(run)) == []


# ---------------------------------------------------------------- --shape beam

def bench_module(name: str) -> Any:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "bench"))


PROSE = "This sentence explains one more step of the plan in some detail. " * 6
CODE = "```python\n" + "".join(f"total_{i} = compute({i})\n" for i in range(30)) + "```"
LONG = f"## Setup\n\n{PROSE}\n\n{CODE}\n\n{PROSE}\n\n- check the logs\n- run the tests"


def write_chats(root: Path) -> Path:
    """Two chats of BEAM's layout: sessions of a user's message and an assistant's long
    answer (cut into passages), and a short one."""
    for chat in ("1", "2"):
        turns = [[{"role": "user", "id": 10 * s, "content": f"Chat {chat} question {s} ->-> 1,2",
                   **({"time_anchor": "March-15-2024"} if s == 0 else {})},
                  {"role": "assistant", "id": 10 * s + 1, "content": LONG if s % 2 == 0
                   else f"A short answer {s}."}] for s in range(3)]
        folder = root / chat
        folder.mkdir(parents=True)
        (folder / "chat.json").write_text(json.dumps(
            [{"batch_number": 1, "time_anchor": "March-15-2024", "turns": turns}]))
        (folder / "probing_questions.json").write_text(json.dumps(
            {"information_extraction": [{"question": f"What did chat {chat} plan?",
                                         "source_chat_ids": [1]}]}))
    return root


def test_beam_memory_i_is_the_same_at_every_size(tmp_path: Path) -> None:
    """A cube of n memories is the prefix of every larger one; past the chats, copies with
    texts, sources, sessions and dates of their own."""
    shape = bench_module("beam_shape")
    data = write_chats(tmp_path)
    base = shape.base(data)
    assert len(base) > 6  # the long answers are several passages each
    small, large = shape.episodes(0, 0, 5, data), shape.episodes(0, 0, 3 * len(base), data)
    assert large[:5] == small
    assert [shape.episode(0, i, data) for i in range(len(large))] == large
    first, copy = large[2], large[2 + len(base)]
    assert copy.base == first.base and copy.candidate.role == first.candidate.role
    assert copy.candidate.span == first.candidate.span
    assert copy.candidate.content == f"{first.candidate.content} (copy 2)"
    assert copy.candidate.source_event_ids != first.candidate.source_event_ids
    assert copy.session != first.session
    assert copy.candidate.event_time > first.candidate.event_time
    from streams.memory.providers.builtin.rows import content_hash
    assert len({content_hash(e.candidate) for e in large}) == len(large)
    # user u of the default mode: chat u mod 2 (two chats here), copy u // 2
    starts = shape.chat_starts(data)
    assert shape.user_offset(1, data) == starts["2"]
    assert shape.episode(shape.user_offset(3, data), 0, data).candidate.content.endswith("(copy 2)")
    assert shape.user_chat(3, data) == "2"
    assert shape.questions("2", data) == ["What did chat 2 plan?"]


def test_beam_passages_carry_role_and_span_and_sessions_as_consolidation_makes_them(
        tmp_path: Path) -> None:
    shape = bench_module("beam_shape")
    from streams.devtools.beam.dataset import load_chats
    from streams.memory.providers.builtin.writes import prepare

    data = write_chats(tmp_path)
    messages = {(c.chat_id, t.id): t.content for c in load_chats(data) for _, t in c.turns()}
    eps = shape.episodes(0, 0, len(shape.base(data)), data)
    passages = [e for e in eps if e.candidate.span is not None]
    assert len(passages) >= 4
    for e in eps:
        c = e.candidate
        assert c.kind == "episode" and c.type == "text" and c.scope == "user"
        source = messages[(e.chat, int(c.source_event_ids[0].rsplit("-", 1)[1]))]
        if c.role == "user":
            assert c.span is None and c.content == f"User: {source}"[:2000]
        else:
            assert c.role == "assistant" and c.content.startswith("Assistant: ")
            if c.span is not None:
                start, end = c.span
                assert c.content == f"Assistant: {source[start:end]}"
                assert len(source[start:end]) <= 1000
    runs = list(shape.by_session(eps))
    assert len(runs) == 6  # three sessions a chat
    for key, run in runs:  # the key one add call of the session's episodes derives
        assert {p.session for p in prepare([e.candidate for e in run], None, "x")} == {key}
    assert [e for _, run in runs for e in run] == eps


def run_query_bench(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "bench/query.py", *args], cwd=ROOT, check=True,
                          capture_output=True, text=True, timeout=900)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


BEAM_DATA = ROOT.parent / "shared" / "bench" / "beam-100k"
needs_beam = pytest.mark.skipif(not (BEAM_DATA / "1" / "chat.json").exists(),
                                reason="the BEAM chats of ../shared are not here")


@needs_beam
def test_a_tiny_beam_run_prints_its_json_line() -> None:
    out = run_query_bench("--shape", "beam", "--users", "3", "--memories", "40",
                          "--seconds", "2", "--rate", "5")
    assert out["shape"] == "beam" and out["users"] == 3 and out["memories_per_user"] == 40
    assert out["requests"] == 10 and out["errors"] == 0
    assert 0 < out["engine_p50_ms"] < out["p50_ms"] <= out["p95_ms"] <= out["p99_ms"]
    assert out["outside_p50_ms"] > 0 and out["embedder"] == "none"


@needs_beam
def test_a_tiny_beam_scale_run_prints_its_curve() -> None:
    out = run_query_bench("--scale", "--shape", "beam", "--sizes", "30,60", "--embedders",
                          "none", "--seconds", "2", "--rate", "5")
    assert out["shape"] == "beam" and [r["memories_per_cube"] for r in out["scale"]] == [30, 60]
    for row in out["scale"]:
        assert row["memories_held"] == row["memories_per_cube"] + 20  # the agent's lessons
        assert row["requests"] == 10 and row["errors"] == 0 and row["p50_ms"] > 0


def test_a_beam_users_cube_is_indexed_off_the_event_loop(tmp_path: Path) -> None:
    """Indexing costs per character: 1,000 BEAM memories go to a thread (their text is as
    long as several thousand short ones'), 1,000 short ones stay on the loop."""
    from types import SimpleNamespace

    from streams.memory.providers.builtin.scope_cache import BUILD_OFF_LOOP, off_loop

    shape, scale_data = bench_module("beam_shape"), bench_module("scale_data")
    data = write_chats(tmp_path)
    beam = [SimpleNamespace(content=e.candidate.content)
            for e in shape.episodes(0, 0, 1000, data)]
    short = [SimpleNamespace(content=scale_data.scale_text("user", i)) for i in range(1000)]
    assert off_loop(beam) and not off_loop(short)
    assert off_loop(short * (BUILD_OFF_LOOP // 1000))  # as many memories as before


async def test_the_first_questions_of_many_users_load_their_scopes_in_turns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The default ``--shape beam`` run's warm-up, small: many users' first questions at once,
    each user's cube indexed in a thread (long memories). The loads go ``LOADS_AT_ONCE``
    at a time, each taking its pooled connection in its turn: none of the searches waits
    out the pool's timeout, and every scope ends up held."""
    import threading

    from sqlalchemy.ext.asyncio import create_async_engine

    from streams.adapters.db.migrate import upgrade
    from streams.memory.model import USER_CUBE
    from streams.memory.provider import Scope, SearchRequest
    from streams.memory.providers.builtin import scope_cache
    from streams.memory.providers.builtin.provider import BuiltinProvider
    from tests.support.services import create_database

    shape = bench_module("beam_shape")
    data = write_chats(tmp_path)
    name = unique("ms_loads_")
    # four connections, each wait for one given up after a second
    engine = create_async_engine(create_database(name), pool_size=2, max_overflow=2,
                                 pool_timeout=1)
    users = [Scope("bench", f"user-{u}", "agent-1") for u in range(8)]
    try:
        await upgrade(engine)
        provider = BuiltinProvider(engine)
        for u, scope in enumerate(users):
            for key, run in shape.by_session(shape.episodes(u * 40, 0, 40, data)):
                await provider.add(scope, USER_CUBE, [e.candidate for e in run],
                                   session_key=key)
        provider = BuiltinProvider(engine)  # nothing held
        build, at_once, most = provider.cache._build, [0], [0]
        lock = threading.Lock()

        def slow_build(st: Any, rows: Any) -> Any:  # a long indexing, off the loop
            with lock:
                at_once[0] += 1
                most[0] = max(most[0], at_once[0])
            time.sleep(1.5)
            with lock:
                at_once[0] -= 1
            return build(st, rows)

        monkeypatch.setattr(provider.cache, "_build", slow_build)
        monkeypatch.setattr(scope_cache, "BUILD_OFF_LOOP", 1)
        found = await asyncio.gather(*(provider.search(s, SearchRequest(
            query="plan the setup", cubes=[USER_CUBE], relativity=0.0)) for s in users),
            return_exceptions=True)
        assert [type(f) for f in found if not isinstance(f, list) or not f] == []
        assert most[0] == scope_cache.LOADS_AT_ONCE
        assert provider.cache.full_loads == len(users)
    finally:
        await engine.dispose()
        drop_database(name)
