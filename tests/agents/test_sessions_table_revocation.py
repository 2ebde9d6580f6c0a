"""A worker keeps no table state of a partition revoked from it (issue 42, finding 6).

Faust's in-memory store forgets, after a rebalance, only the keys it recovered
from the changelog. A state this worker wrote itself stayed: when the state was
dropped elsewhere meanwhile and its tombstone compacted away, the partition
coming back brought the stale state back (its old session number, its user id,
its outbox). Here the table is Faust's own, over its memory store; only the
changelog producer is left out (no broker), and recovery is the store's own
``apply_changelog_batch`` and ``on_recovery_completed``.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import faust
import pytest
from faust.types import TP

from streams.worker.faust_glue import event_context, partitioned_table

SOURCE = "chat"


@pytest.fixture
def table() -> Iterator[Any]:
    app = faust.App("revocation-test", broker="kafka://127.0.0.1:1", store="memory://")
    t = partitioned_table(app, "sessions", key_type=str, help="test")
    # the changelog record is what a broker would get; its partition is the event's
    t.send_changelog = lambda partition, key, value, *a, **kw: SimpleNamespace(
        message=SimpleNamespace(partition=partition))
    t._verified_source_topics_for_partitions.add(SOURCE)
    yield t


def changelog(table: Any, partition: int) -> TP:
    return TP(table._changelog_topic_name(), partition)


class Event:
    """What Faust's table reads of the current event (held by weak reference)."""

    def __init__(self, partition: int) -> None:
        self.message = SimpleNamespace(topic=SOURCE, partition=partition)


def write(table: Any, partition: int, key: str, value: dict[str, Any] | None) -> None:
    event = Event(partition)
    with event_context(event):
        if value is None:
            del table[key]
        else:
            table[key] = value


def recovered(partition: int, key: str, value: Any) -> Any:
    """A changelog record as Faust's recovery hands it to the store."""
    return SimpleNamespace(key=key, value=value,
                           message=SimpleNamespace(partition=partition, value=value))


async def rebalance(table: Any, before: set[int], after: set[int]) -> None:
    assigned = {changelog(table, p) for p in after}
    revoked = {changelog(table, p) for p in before - after}
    await table.on_rebalance(assigned, revoked, {changelog(table, p) for p in after - before})


async def test_a_state_written_here_leaves_with_its_partition(table: Any) -> None:
    write(table, 1, "t1/c1", {"session_seq": 3, "user_id": "alice"})
    write(table, 2, "t1/c2", {"session_seq": 1, "user_id": "bob"})
    await rebalance(table, {1, 2}, {2})  # partition 1 moves to another worker
    assert "t1/c1" not in table and table["t1/c2"]["user_id"] == "bob"

    # elsewhere the state was dropped, its tombstone compacted: partition 1 comes
    # back with a changelog that holds nothing for it
    await rebalance(table, {2}, {1, 2})
    table.data.apply_changelog_batch([], lambda k: k, lambda v: v)
    await table.data.on_recovery_completed({changelog(table, 1), changelog(table, 2)}, set())
    assert "t1/c1" not in table and dict(table.items()) == {"t1/c2": {"session_seq": 1,
                                                                       "user_id": "bob"}}


async def test_recovered_and_written_keys_both_go_and_the_rest_stays(table: Any) -> None:
    table.data.apply_changelog_batch([recovered(0, "t1/old", {"session_seq": 9})],
                                     lambda k: k, lambda v: v)
    write(table, 0, "t1/new", {"session_seq": 1})
    write(table, 3, "t1/kept", {"session_seq": 2})
    write(table, 0, "t1/gone", {"session_seq": 1})
    write(table, 0, "t1/gone", None)  # deleted here: nothing left to forget
    await rebalance(table, {0, 3}, {3})
    assert dict(table.items()) == {"t1/kept": {"session_seq": 2}}
    # a rebalance that takes nothing away keeps everything
    await rebalance(table, {3}, {3})
    assert dict(table.items()) == {"t1/kept": {"session_seq": 2}}


@pytest.mark.parametrize(("source_n", "changelog_n", "fails"), [
    (4, 0, False),  # the changelog just created: not in the group's metadata yet
    (0, 4, False),
    (4, None, False),  # not subscribed: Faust's own rule, nothing to compare
    (4, 4, False),
    (4, 2, True),  # a real mismatch
])
def test_a_write_fails_only_on_a_known_partition_mismatch(
        source_n: int, changelog_n: int | None, fails: bool) -> None:
    app = faust.App("mismatch-test", broker="kafka://127.0.0.1:1", store="memory://")
    t = partitioned_table(app, "sessions", key_type=str, help="test")
    t.send_changelog = lambda partition, key, value, *a, **kw: SimpleNamespace(
        message=SimpleNamespace(partition=partition))
    counts = {SOURCE: source_n, t._changelog_topic_name(): changelog_n}
    app.consumer = SimpleNamespace(topic_partitions=counts.get)
    if fails:
        with pytest.raises(faust.exceptions.PartitionsMismatch):
            write(t, 1, "t1/c1", {"session_seq": 1})
        assert "t1/c1" not in t
    else:
        write(t, 1, "t1/c1", {"session_seq": 1})
        assert t["t1/c1"] == {"session_seq": 1}
    # once the metadata knows both topics (4 and 4), a write is checked and passes
    counts[t._changelog_topic_name()] = counts[SOURCE] = 4
    write(t, 2, "t1/c2", {"session_seq": 1})
    assert t["t1/c2"] == {"session_seq": 1}
