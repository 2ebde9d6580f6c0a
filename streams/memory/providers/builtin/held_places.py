"""The places and word sets of a scope's held memories as arrays, read by id.

A search fuses a few hundred candidates per scope (:func:`~streams.memory.rules.
fusion.fuse_arrays`) and de-duplicates its picks by their word sets (MMR,
:func:`~streams.memory.rules.mmr.jaccard_of_words`). It reads their sessions,
orders, speakers, whether they are preferences, and their words here, by
their rows, instead of a dict lookup and an object per candidate. An id's row
is read from a table of the held ids' span when they are packed closely (a
scope's memories mostly are: at most ``ROW_TABLE_SPAN`` times as many ids as
memories, the table four bytes per id), built at the first lookup after a
change; else by a binary search of the ids. A search looks up a few thousand
ids per scope, and at 100,000 memories half of a binary search's steps miss the
processor's caches. Sessions, speakers and the messages passages come from are numbered per
scope; an expiry leaves a name no memory held has any more until such names
are half of them, and then they are numbered anew. The word sets lie end to end in one array; an
expiry leaves its words there until they are half of it.

Memories come in ascending id order (a scope state only ever adds ids above the
ones it holds), so appending keeps the ids sorted; an expiry takes rows out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from streams.memory.rules.fusion import Places, rows_of

Ids = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Flags = npt.NDArray[np.bool_]
_NONE: Ids = np.zeros(0, dtype=np.int64)
_NO_TABLE = np.zeros(0, dtype=np.int32)
PREFERENCE = "preference"
ROW_TABLE_SPAN = 4


class HeldPlaces:
    def __init__(self) -> None:
        self.ids: Ids = _NONE
        self.session: Ids = _NONE  # -1: a standalone memory
        self.seq: Ids = _NONE
        self.speaker: Ids = _NONE  # -1: no speaker
        self.preference: Flags = np.zeros(0, dtype=bool)
        self.source: Ids = _NONE  # the message a passage is part of (-1: none)
        self.assistant: Flags = np.zeros(0, dtype=bool)  # made from an assistant's message
        self.instruction: Flags = np.zeros(0, dtype=bool)  # a user's standing instruction
        self.time: Floats = np.zeros(0, dtype=np.float64)  # event time, s (NaN: none)
        self.changed: Flags = np.zeros(0, dtype=bool)  # announces a change (rules.recency)
        self.values: Ids = _NONE  # the values it states (rules.recency.value_signature)
        self.sources: dict[str, int] = {}
        self.source_names: list[str] = []
        self.sessions: dict[str, int] = {}
        self.session_names: list[str] = []
        self.speakers: dict[str, int] = {}
        self.speaker_names: list[str] = []
        self._words: Ids = _NONE  # every row's word ids (mmr.word_ids), end to end, and room
        self._words_used = 0
        self.word_at: Ids = _NONE  # where each row's words begin in ``words``
        self.word_count: Ids = _NONE  # how many words each row has
        self._table: npt.NDArray[np.int32] | None = None  # row by id - ids[0]; None: to build

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, ids: Sequence[int], places: Sequence[tuple[str | None, int, str | None]],
            types: Sequence[str], words: Ids, counts: Ids,
            sources: Sequence[str | None] | None = None,
            assistant: Sequence[bool] | None = None,
            said: tuple[Sequence[float], Sequence[bool], Sequence[int]] | None = None,
            instruction: Sequence[bool] | None = None) -> None:
        """Memories above every held id, with their (session, seq, speaker), type, word
        ids (``words``: each memory's in turn, ``counts`` of them), the message each
        episode is part of (``sources``; None: none), whether it was an assistant's,
        whether it is a user's standing instruction (``instruction``; None: none is),
        and what it says when (``said``: event times in s, NaN: none; whether it
        announces a change; its value signature, :mod:`~streams.memory.rules.recency`)."""
        if not ids:
            return
        new = np.array(ids, dtype=np.int64)
        assert (not len(self.ids) or int(new[0]) > int(self.ids[-1])) and bool(
            (new[1:] > new[:-1]).all()), "ids must ascend"
        self.ids = np.concatenate([self.ids, new])
        self._table = None
        self.session = np.concatenate([self.session, np.array(
            [self._code(s, self.sessions, self.session_names, None) for s, _, _ in places],
            dtype=np.int64)])
        self.seq = np.concatenate([self.seq, np.array([q for _, q, _ in places], np.int64)])
        self.speaker = np.concatenate([self.speaker, np.array(
            [self._code(p, self.speakers, self.speaker_names, "") for _, _, p in places],
            dtype=np.int64)])
        self.preference = np.concatenate([self.preference, np.array(
            [t == PREFERENCE for t in types], dtype=bool)])
        self.source = np.concatenate([self.source, np.array(
            [self._code(c, self.sources, self.source_names, None)
             for c in (sources if sources is not None else [None] * len(ids))],
            dtype=np.int64)])
        self.assistant = np.concatenate([self.assistant, np.array(
            assistant if assistant is not None else [False] * len(ids), dtype=bool)])
        self.instruction = np.concatenate([self.instruction, np.array(
            instruction if instruction is not None else [False] * len(ids), dtype=bool)])
        times, changed, values = said if said is not None else (
            [np.nan] * len(ids), [False] * len(ids), [0] * len(ids))
        self.time = np.concatenate([self.time, np.array(times, dtype=np.float64)])
        self.changed = np.concatenate([self.changed, np.array(changed, dtype=bool)])
        self.values = np.concatenate([self.values, np.array(values, dtype=np.int64)])
        assert len(counts) == len(ids) and int(counts.sum()) == len(words), "words per memory"
        starts = self._words_used + np.cumsum(counts) - counts
        self._put_words(words)
        self.word_at = np.concatenate([self.word_at, starts])
        self.word_count = np.concatenate([self.word_count, counts])

    @staticmethod
    def _code(name: str | None, codes: dict[str, int], names: list[str],
              none: str | None) -> int:
        """The name's number (-1: None, or ``none``, which also stands for no name)."""
        if name is None or name == none:
            return -1
        code = codes.get(name)
        if code is None:
            code = codes[name] = len(names)
            names.append(name)
        return code

    def drop(self, ids: Ids) -> None:
        """Forget these memories (ids not held are ignored)."""
        keep = ~np.isin(self.ids, ids)
        if keep.all():
            return
        self.ids, self.session, self.seq = self.ids[keep], self.session[keep], self.seq[keep]
        self._table = None
        self.speaker, self.preference = self.speaker[keep], self.preference[keep]
        self.source = _renumbered(self.source[keep], self.source_names, self.sources)
        self.assistant, self.instruction = self.assistant[keep], self.instruction[keep]
        self.time, self.changed, self.values = (self.time[keep], self.changed[keep],
                                                 self.values[keep])
        self.word_at, self.word_count = self.word_at[keep], self.word_count[keep]
        self.session = _renumbered(self.session, self.session_names, self.sessions)
        self.speaker = _renumbered(self.speaker, self.speaker_names, self.speakers)
        if 2 * int(self.word_count.sum()) < len(self.words):
            every = self.words_of(np.arange(len(self.ids)))
            self._words, self._words_used = every, len(every)
            self.word_at = np.cumsum(self.word_count) - self.word_count

    @property
    def words(self) -> Ids:
        return self._words[:self._words_used]

    def _put_words(self, new: Ids) -> None:
        """Append, in a buffer grown by a quarter: a refresh adds a few memories' words
        without copying the scope's."""
        end = self._words_used + len(new)
        if end > len(self._words):
            grown = np.empty(max(end, len(self._words) * 5 // 4, 1024), dtype=np.int64)
            grown[:self._words_used] = self.words
            self._words = grown
        self._words[self._words_used:end] = new
        self._words_used = end

    def rows(self, ids: Ids) -> Ids:
        """Each id's row, -1 for an id not held."""
        table = self._table if self._table is not None else self._row_table()
        if not len(table):
            return rows_of(self.ids, ids)
        at = ids - self.ids[0]
        inside = (at >= 0) & (at < len(table))
        out = np.full(len(ids), -1, dtype=np.int64)
        out[inside] = table[at[inside]]
        return out

    def _row_table(self) -> npt.NDArray[np.int32]:
        """The row of each id of the held ids' span (-1: not held), or none when they
        are spread too thinly for one."""
        ids = self.ids
        span = int(ids[-1] - ids[0]) + 1 if len(ids) else 0
        if not span or span > ROW_TABLE_SPAN * len(ids):
            self._table = _NO_TABLE
        else:
            self._table = np.full(span, -1, dtype=np.int32)
            self._table[ids - ids[0]] = np.arange(len(ids), dtype=np.int32)
        return self._table

    def words_of(self, rows: Ids) -> Ids:
        """The word ids of these rows, end to end (their counts: ``word_count[rows]``)."""
        counts = self.word_count[rows]
        ends = np.cumsum(counts)
        # each word's index: its row's start, plus its place within the row
        at = np.repeat(self.word_at[rows] - (ends - counts), counts) + np.arange(
            int(ends[-1]) if len(ends) else 0)
        return self.words[at]

    def places(self, ids: Ids) -> Places:
        """The places of ``ids`` (held, ascending, distinct) for the fusion."""
        at = self.rows(ids)
        assert (at >= 0).all(), "places of memories not held"
        return Places(ids, self.session[at], self.seq[at], self.speaker[at], self.speaker_names,
                      self.source[at], self.assistant[at], self.instruction[at])


def _renumbered(codes: Ids, names: list[str], numbers: dict[str, int]) -> Ids:
    """``codes`` renumbered once fewer than half the ``names`` are still in use: the
    names no memory held has any more are forgotten (``names`` and ``numbers`` are
    updated in place). A code, or a :class:`Places`' names, is thus good only until
    the next :meth:`HeldPlaces.drop`: a search reads them without yielding in between."""
    used = np.bincount(codes[codes >= 0], minlength=len(names)) > 0
    if 2 * int(used.sum()) >= len(names):
        return codes
    kept = [name for name, u in zip(names, used.tolist(), strict=True) if u]
    names[:] = kept
    numbers.clear()
    numbers.update(zip(kept, range(len(kept)), strict=True))
    new = np.cumsum(used) - 1
    return np.where(codes >= 0, new[np.maximum(codes, 0)], -1)
