"""A session longer than one run takes, on MariaDB and Kafka: consolidated in several
bounded runs, every message once, also when the worker is killed between parts; a
session too long for one run is cut at ingest."""

from __future__ import annotations

from tests.integration.conftest import Stack, chat_event, session_end_event
from tests.integration.consolidation_support import FAST, run_status, runs_open
from tests.support.worker import eventually


def parts(stack: Stack) -> list[tuple[str, int, int]]:
    """(closed_id, message_count, ledger rows) of every run, in claim order."""
    rows = stack.sql(
        "SELECT r.closed_id, r.message_count, "
        "(SELECT COUNT(*) FROM consolidation_ledger l WHERE l.closed_id = r.closed_id) "
        "FROM consolidation_run r ORDER BY r.created_at, r.closed_id")
    return [(r[0], int(r[1]), int(r[2])) for r in rows]


def each_message_once(stack: Stack, n: int) -> None:
    """Every one of the ``n`` messages claimed once and kept as one episode."""
    (claimed, distinct), = stack.sql(
        "SELECT COUNT(*), COUNT(DISTINCT message_id) FROM consolidation_ledger")
    assert (int(claimed), int(distinct)) == (n, n)
    (total, sources), = stack.sql(
        "SELECT COUNT(*), COUNT(DISTINCT source_event_ids) FROM memory WHERE kind = 'episode'")
    assert (int(total), int(sources)) == (n, n)


async def test_a_long_session_is_consolidated_in_bounded_runs(stack: Stack) -> None:
    stack.extra_env.update({**FAST, "MEMSTREAM_CONSOLIDATION__MAX_MESSAGES": "10",
                            "MEMSTREAM_CONSOLIDATION__SESSION_MAX_MESSAGES": "100000"})
    stack.worker().start()
    await stack.produce([*(chat_event(i, "c1") for i in range(45)), session_end_event("c1")])
    await eventually(lambda: run_status(stack, "t1/c1#1+5") == "done", 120, "the fifth part")
    await eventually(lambda: runs_open(stack) == 0, 30, "every part done")
    got = parts(stack)
    assert [(c, m) for c, m, _ in got] == [
        ("t1/c1#1", 10), ("t1/c1#1+2", 10), ("t1/c1#1+3", 10), ("t1/c1#1+4", 10),
        ("t1/c1#1+5", 5)]
    assert all(rows == m <= 10 for _, m, rows in got)
    each_message_once(stack, 45)


async def test_a_worker_killed_between_parts_loses_and_doubles_nothing(stack: Stack) -> None:
    stack.extra_env.update({**FAST, "MEMSTREAM_CONSOLIDATION__MAX_MESSAGES": "4",
                            "MEMSTREAM_CONSOLIDATION__SESSION_MAX_MESSAGES": "100000"})
    stack.worker().start()
    await stack.produce([*(chat_event(i, "c1") for i in range(60)), session_end_event("c1")])
    await eventually(lambda: run_status(stack, "t1/c1#1+3") is not None, 120, "the third part")
    stack.workers[-1].kill()  # SIGKILL somewhere in the chain of parts
    assert run_status(stack, "t1/c1#1+15") is None, "the whole chain ran before the kill"
    stack.worker().start()
    await eventually(lambda: run_status(stack, "t1/c1#1+15") == "done", 180, "the last part")
    await eventually(lambda: runs_open(stack) == 0, 30, "every part done")
    got = parts(stack)
    assert [c for c, _, _ in got] == ["t1/c1#1", *(f"t1/c1#1+{n}" for n in range(2, 16))]
    assert all(rows == m <= 4 for _, m, rows in got)
    assert sum(m for _, m, _ in got) == 60
    each_message_once(stack, 60)


async def test_a_session_reaching_its_size_is_cut_at_ingest(stack: Stack) -> None:
    stack.extra_env.update({**FAST, "MEMSTREAM_CONSOLIDATION__SESSION_MAX_MESSAGES": "20"})
    stack.worker().start()
    await stack.produce([*(chat_event(i, "c1") for i in range(45)), session_end_event("c1")])
    await eventually(lambda: run_status(stack, "t1/c1#3") == "done", 120, "the third session")
    await eventually(lambda: runs_open(stack) == 0, 30, "every run done")
    assert [(c, m) for c, m, _ in parts(stack)] == [
        ("t1/c1#1", 20), ("t1/c1#2", 20), ("t1/c1#3", 5)]
    stamps = stack.sql("SELECT session_seq, COUNT(*) FROM conversation_message "
                       "GROUP BY session_seq ORDER BY session_seq")
    assert [tuple(r) for r in stamps] == [("1", "20"), ("2", "20"), ("3", "5")]
    each_message_once(stack, 45)
