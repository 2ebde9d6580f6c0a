"""Erasure fences: where an erasure meets the ingest stream of one partition.

A fence (on the idle topic) is taken in before anything of its batch is
classified, so the events its erasure covers are skipped from there on, also
earlier in the same batch. Its tombstones (the deletes of the erased
conversations' session states) are staged with the batch's states, and the
fence is recorded as passed only once everything stored before it is written
(the batch's second stage), its tombstones included.

A tenant's or a conversation's tombstones are known from the fence itself. A
user's depend on which conversations only they spoke in: the erasure looks that
up once every partition has taken it in (nothing it covers is stored after
that) and sends a second round of fences (``round`` 2) to the partitions that
hold those conversations, which read the list the erasure recorded — a read of
the erasure's own rows, never a scan of the messages inside an ingest batch,
which would hold up every tenant of the partition.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial

from streams.backoff import retry_forever
from streams.clock import naive_utc
from streams.erasure.model import ErasureMark
from streams.erasure.rules.coverage import ErasureIndex
from streams.ingest.model import IngestConfig
from streams.ingest.ports import FencePassed, WholeConversations
from streams.session.model import SessionState, split_table_key, table_key
from streams.session.state_buffer import SessionStateBuffer
from streams.wire.decode import decode_idle_record
from streams.wire.envelope import SourceRecord
from streams.wire.erasure import ErasureFence

Fence = tuple[SourceRecord, ErasureFence]


class ErasureFences:
    """``whole``: what a user erasure takes whole, as stored (None: nothing);
    ``passed``: where a passed fence is recorded (None: nowhere)."""

    def __init__(self, config: IngestConfig, erasures: ErasureIndex,
                 states: SessionStateBuffer, *, home: Callable[[str], int] | None,
                 whole: WholeConversations | None, passed: FencePassed | None) -> None:
        self.config = config
        self.erasures = erasures
        self.states = states
        self.home = home
        self.whole = whole
        self.passed = passed

    def take_in(self, records: Sequence[SourceRecord]) -> list[Fence]:
        """The batch's erasure fences, taken in before anything of the batch is
        classified: from here on, the events they cover are skipped."""
        idle = self.config.idle_topic
        out = []
        for rec in records:
            if rec.topic == idle and (fence := decode_idle_record(rec.value)) is not None \
                    and isinstance(fence, ErasureFence):
                self.erasures.add(ErasureMark(
                    fence.erasure_id, fence.tenant_id, fence.target, fence.subject,
                    naive_utc(fence.cutoff), dict(fence.chat_offsets), seq=fence.seq))
                out.append((rec, fence))
        return out

    async def tombstones(self, fences: Sequence[Fence]) -> list[tuple[ErasureFence, int]]:
        """Stage the deletes of the sessions-table entries the fences erase that live
        in the fence's partition: every conversation of an erased tenant; the erased
        conversation; at a user erasure's second round, the conversations only the
        user spoke in, as the erasure recorded them (its first round takes the
        erasure in only); and at that round the states of the group chats the user
        spoke in name them no more. Each fence with how many it deleted."""
        out = []
        for rec, fence in fences:
            if fence.target == "tenant":
                prefix = table_key(fence.tenant_id, "")
                keys = [k for k in self.states.stored_keys() if k.startswith(prefix)]
            elif fence.target == "conversation":
                keys = [table_key(fence.tenant_id, fence.subject)]
            elif fence.round == 2 and self.whole is not None:
                keys = [table_key(fence.tenant_id, c) for c in await self._read(
                    self.whole.whole_conversations, fence.seq)]
                for k in self._mine(rec, [table_key(fence.tenant_id, c) for c in await self._read(
                        self.whole.shared_conversations, fence.seq)]):
                    self._forget(k, fence.subject, rec)
            else:
                keys = []
            gone = [k for k in self._mine(rec, keys) if self.states.get(k) is not None]
            for k in gone:
                self.states.stage(k, None, rec)
            out.append((fence, len(gone)))
        return out

    def _mine(self, rec: SourceRecord, keys: Sequence[str]) -> list[str]:
        return [k for k in keys if self.home is None
                or self.home(split_table_key(k)[1]) == rec.partition]

    async def _read(self, lookup: Callable[[int], Awaitable[list[str]]], seq: int) -> list[str]:
        return await retry_forever(partial(lookup, seq), what="erasure-fence",
                                   initial_s=self.config.retry_initial_s,
                                   max_s=self.config.retry_max_s)

    def _forget(self, key: str, user_id: str, rec: SourceRecord) -> None:
        """A group chat's state names the erased user no more (the speaker before them
        when they spoke last)."""
        value = self.states.get(key)
        state = SessionState.from_table(value)
        if state is not None and state.forget_speaker(user_id):
            self.states.stage(key, state.to_table(), rec)

    async def pass_fences(self, passed: Sequence[tuple[ErasureFence, int]]) -> None:
        """Record each fence as passed, with its tombstones."""
        record = self.passed
        if record is None:
            return
        for fence, tombstones in passed:
            await retry_forever(partial(record, fence, tombstones), what="erasure-fence",
                                initial_s=self.config.retry_initial_s,
                                max_s=self.config.retry_max_s)
