"""IsolatingWriter against a fake write: bad rows are isolated, the rest stored,
and only what is to be retried escapes."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pymysql.err as my
import pytest
from sqlalchemy import exc as sa

from streams.adapters.db.errors import DbErrorKind
from streams.adapters.db.isolation import IsolatingWriter


def refused() -> Exception:
    return sa.DataError("INSERT", {}, my.DataError(1406, "Data too long"))


def lost() -> Exception:
    return sa.OperationalError("INSERT", {}, my.OperationalError(2013, "Lost connection"))


def odd() -> Exception:
    return sa.OperationalError("INSERT", {}, my.OperationalError(1105, "Unknown error"))


class FakeTable:
    """Writes are all-or-nothing; rows in ``bad`` always fail with ``error()``."""

    def __init__(self, bad: set[int] | None = None,
                 error: Callable[[], Exception] = refused) -> None:
        self.bad, self.error = set(bad or ()), error
        self.rows: list[int] = []
        self.writes = 0
        self.probes = 0
        self.down = 0  # the next n writes (and probes) fail with a lost connection
        self.probe_fails = False
        self.flaky: dict[int, int] = {}  # row -> failures left before it is written

    async def write(self, part: Sequence[int]) -> set[int]:
        self.writes += 1
        if self.down:
            self.down -= 1
            raise lost()
        for r in part:
            if self.flaky.get(r):
                self.flaky[r] -= 1
                raise odd()
        if self.bad & set(part):
            raise self.error()
        new = {r for r in part if r not in self.rows}
        self.rows += [r for r in part if r in new]
        return new

    async def probe(self) -> None:
        self.probes += 1
        if self.probe_fails:
            raise self.error()


async def no_sleep(_: float) -> None:
    return None


def writer(table: FakeTable, rows: Sequence[int]) -> IsolatingWriter[int, int]:
    return IsolatingWriter(table.write, rows, probe=table.probe, sleep=no_sleep)


@pytest.mark.parametrize("bad", [set(), {0}, {9}, {4}, {0, 9}, {2, 3, 4}, set(range(10))])
async def test_bad_rows_are_refused_and_the_rest_stored_in_order(bad: set[int]) -> None:
    table = FakeTable(bad)
    out = await writer(table, list(range(10))).run()
    assert [r.index for r in out.rejected] == sorted(bad)
    assert all(r.error.kind is DbErrorKind.ROW and r.error.code == 1406 for r in out.rejected)
    assert table.rows == [r for r in range(10) if r not in bad]
    assert out.stored == set(table.rows)
    assert table.probes == len(bad)  # each refusal is checked against a good write


async def test_one_bad_row_in_a_thousand_takes_a_few_writes() -> None:
    table = FakeTable({617})
    out = await writer(table, list(range(1000))).run()
    assert [r.index for r in out.rejected] == [617] and len(table.rows) == 999
    assert table.writes <= 2 * 10 + 1


async def test_a_transient_error_escapes_and_the_next_run_carries_on() -> None:
    table = FakeTable({5})
    w = writer(table, list(range(8)))
    table.down = 1
    with pytest.raises(sa.OperationalError):
        await w.run()
    assert table.rows == []
    out = await w.run()
    assert [r.index for r in out.rejected] == [5] and table.rows == [0, 1, 2, 3, 4, 6, 7]
    # a connection lost in the middle of the split: nothing stored twice, nothing refused
    table2 = FakeTable({5})
    w2 = writer(table2, list(range(8)))
    real = table2.write
    calls = 0

    async def fails_third(part: Sequence[int]) -> set[int]:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise lost()
        return await real(part)

    w2._write = fails_third  # type: ignore[method-assign]
    with pytest.raises(sa.OperationalError):
        await w2.run()
    out2 = await w2.run()
    assert [r.index for r in out2.rejected] == [5] and table2.rows == [0, 1, 2, 3, 4, 6, 7]
    assert out2.stored == set(table2.rows)


async def test_an_unknown_error_is_tried_again_before_the_row_is_refused() -> None:
    table = FakeTable()
    table.flaky = {3: 2}  # fails twice with an unlisted error, then goes in
    out = await writer(table, list(range(6))).run()
    assert out.rejected == [] and table.rows == [0, 1, 2, 3, 4, 5]
    table = FakeTable({3}, error=odd)  # always fails with an unlisted error
    out = await writer(table, list(range(6))).run()
    assert [(r.index, r.error.kind) for r in out.rejected] == [(3, DbErrorKind.UNKNOWN)]
    assert table.rows == [0, 1, 2, 4, 5]


@pytest.mark.parametrize("error", [refused, odd])
async def test_nothing_is_refused_while_the_database_takes_no_write(
    error: Callable[[], Exception],
) -> None:
    table = FakeTable(set(range(4)), error=error)  # e.g. a constraint every row breaks
    table.probe_fails = True
    w = writer(table, list(range(4)))
    for _ in range(3):
        with pytest.raises(type(error())):
            await w.run()
    assert table.rows == [] and w.result.rejected == []
    table.bad.clear()  # fixed: everything goes in, nothing was dead-lettered
    table.probe_fails = False
    out = await w.run()
    assert out.rejected == [] and table.rows == [0, 1, 2, 3]


async def test_an_empty_batch_writes_nothing() -> None:
    table = FakeTable()
    out = await writer(table, []).run()
    assert (out.stored, out.rejected, table.writes) == (set(), [], 0)
