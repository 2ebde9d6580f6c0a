"""The places of a scope's held memories as arrays, for the fusion to read by id.

A search fuses a few hundred candidates per scope (:func:`~streams.memory.rules.
fusion.fuse_arrays`). It reads their sessions, orders, speakers and whether they
are preferences here, by a binary search of their ids, instead of a dict lookup
and an object per candidate. Sessions and speakers are numbered per scope (a
name keeps its number while the scope is held).

Memories come in ascending id order (a scope state only ever adds ids above the
ones it holds), so appending keeps the ids sorted; an expiry takes rows out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from streams.memory.rules.fusion import Places, rows_of

Ids = npt.NDArray[np.int64]
Flags = npt.NDArray[np.bool_]
_NONE: Ids = np.zeros(0, dtype=np.int64)
PREFERENCE = "preference"


class HeldPlaces:
    def __init__(self) -> None:
        self.ids: Ids = _NONE
        self.session: Ids = _NONE  # -1: a standalone memory
        self.seq: Ids = _NONE
        self.speaker: Ids = _NONE  # -1: no speaker
        self.preference: Flags = np.zeros(0, dtype=bool)
        self.sessions: dict[str, int] = {}
        self.session_names: list[str] = []
        self.speakers: dict[str, int] = {}
        self.speaker_names: list[str] = []

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, ids: Sequence[int], places: Sequence[tuple[str | None, int, str | None]],
            types: Sequence[str]) -> None:
        """Memories above every held id, with their (session, seq, speaker) and type."""
        if not ids:
            return
        new = np.array(ids, dtype=np.int64)
        assert (not len(self.ids) or int(new[0]) > int(self.ids[-1])) and bool(
            (new[1:] > new[:-1]).all()), "ids must ascend"
        self.ids = np.concatenate([self.ids, new])
        self.session = np.concatenate([self.session, np.array(
            [self._code(s, self.sessions, self.session_names, None) for s, _, _ in places],
            dtype=np.int64)])
        self.seq = np.concatenate([self.seq, np.array([q for _, q, _ in places], np.int64)])
        self.speaker = np.concatenate([self.speaker, np.array(
            [self._code(p, self.speakers, self.speaker_names, "") for _, _, p in places],
            dtype=np.int64)])
        self.preference = np.concatenate([self.preference, np.array(
            [t == PREFERENCE for t in types], dtype=bool)])

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
        self.speaker, self.preference = self.speaker[keep], self.preference[keep]

    def rows(self, ids: Ids) -> Ids:
        """Each id's row, -1 for an id not held."""
        return rows_of(self.ids, ids)

    def places(self, ids: Ids) -> Places:
        """The places of ``ids`` (held, ascending, distinct) for the fusion."""
        at = self.rows(ids)
        assert (at >= 0).all(), "places of memories not held"
        return Places(ids, self.session[at], self.seq[at], self.speaker[at], self.speaker_names)
