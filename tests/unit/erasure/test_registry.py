"""The registry tells each finished erasure once, with its record, however the
erasures finish (here or elsewhere, in order or not); its first look, the ones
finished before it, unnamed."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from streams.erasure.model import ErasureMark, ErasureRecord, Status
from streams.erasure.ports import ErasureLog
from streams.erasure.registry import ErasureRegistry

AT = datetime(2026, 12, 1, 12, 0)


class Log:
    """The erasure log's reads the registry makes, in memory."""

    def __init__(self) -> None:
        self.status: dict[int, Status] = {}
        self.marks: dict[int, ErasureMark] = {}
        self.unfinished_reads = 0

    def record(self, seq: int, status: Status = "recorded") -> ErasureMark:
        self.marks[seq] = ErasureMark(f"e-{seq}", "t1", "user", f"u{seq}", AT, {}, None, seq)
        self.status[seq] = status
        return self.marks[seq]

    async def marks_since(self, seq: int) -> list[ErasureMark]:
        return [m for s, m in sorted(self.marks.items()) if s > seq]

    async def last_done(self) -> int:
        return max((s for s, st in self.status.items() if st == "done"), default=0)

    async def unfinished(self) -> list[ErasureRecord]:
        self.unfinished_reads += 1
        return [ErasureRecord(self.marks[s], st, None, AT, None)
                for s, st in sorted(self.status.items()) if st != "done"]


async def test_each_finished_erasure_is_told_once_with_its_record() -> None:
    log = Log()
    log.record(1, "done")
    log.record(2)
    registry = ErasureRegistry(cast(ErasureLog, log))
    told: list[Any] = []
    registry.on_finished(lambda mark: told.append(mark.seq if mark else None))
    await registry.refresh()
    assert told == [None]  # finished before the first look: unnamed
    log.record(3)
    log.record(4)
    await registry.refresh()
    assert told == [None] and log.unfinished_reads == 1  # nothing finished: not asked
    log.status[4] = "done"  # out of order: 2 and 3 still going
    await registry.refresh()
    assert told == [None, 4]
    log.status[3] = "done"  # the newest finished one stays 4
    await registry.refresh()
    assert told == [None, 4, 3]
    registry.finished(2)  # carried out here
    log.status[2] = "done"
    await registry.refresh()
    await registry.refresh()
    assert told == [None, 4, 3, 2]
    reads = log.unfinished_reads
    await registry.refresh()
    assert log.unfinished_reads == reads  # none left waiting: not asked again


async def test_a_listener_failing_does_not_stop_the_others() -> None:
    log = Log()
    registry = ErasureRegistry(cast(ErasureLog, log))
    await registry.refresh()
    told: list[int] = []

    def fails(_: ErasureMark | None) -> None:
        raise RuntimeError("boom")

    registry.on_finished(fails)
    registry.on_finished(lambda mark: told.append(mark.seq if mark else 0))
    registry.add(log.record(1))
    log.status[1] = "done"
    await registry.refresh()
    assert told == [1]
