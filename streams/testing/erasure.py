"""In-memory doubles of the erasure stage's ports (:mod:`streams.erasure.ports`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from streams.erasure.ports import ErasureLog
from streams.wire.envelope import Outgoing
from streams.wire.erasure import ErasureFence


class FencePassingPublisher:
    """:class:`~streams.wire.envelope.Publisher` of an erasure's fences that sends
    nothing and passes each fence at once in ``log``, as every ingest partition would;
    ``fences``: those published."""

    def __init__(self, log: ErasureLog, passed_at: datetime) -> None:
        self.log = log
        self.passed_at = passed_at
        self.fences: list[ErasureFence] = []

    async def publish(self, records: Sequence[Outgoing]) -> None:
        for r in records:
            f = ErasureFence.model_validate_json(r.value or b"")
            self.fences.append(f)
            await self.log.pass_fence(f.seq, f.partition, 0, self.passed_at, f.round)
