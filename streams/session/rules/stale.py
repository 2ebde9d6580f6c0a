"""StaleSet: what one process knows of the stale conversation histories (pure).

A conversation's Redis list is *stale* when it may lack messages the database
holds: a write to Redis failed, or was skipped, after the batch was stored.
The durable record is a mark in the database (one row per conversation, its
``mark_id`` replaced on every new mark); this set is the process's view of the
marks, so that the writer stops appending to such a list at once and the
reader of the same process treats it as stale without waiting for the
database.

Each entry is ``(seq, mark_id)``: ``mark_id`` is the id of the mark as stored,
None while the mark is being written (*pending*), or ``UNKNOWN_MARK`` when the
write was interrupted (the next clear or re-read finds out what is stored);
``seq`` changes whenever the entry does. Clearing is compare-and-clear: whoever drops a list (or
re-reads the marks) takes the entries first and may forget an entry only if
it is still the one it took — a failure in between keeps it.

``limit`` bounds the memory: when the set is full, new keys are not held here.
Their marks are still durable, so nothing is lost: the reader asks the
database, and a later re-read of the marks picks them up once there is room.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from streams.session.model import ConversationKey

UNKNOWN_MARK = 0  # a mark whose write was interrupted: stored or not, no stored mark has this id


@dataclass(frozen=True, slots=True)
class Entry:
    seq: int
    mark_id: int | None  # None: the mark is being written

    @property
    def pending(self) -> bool:
        return self.mark_id is None


class StaleSet:
    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be positive")
        self.limit = limit
        self.overflow = 0  # keys not held because the set was full
        self._seq = 0
        self._entries: dict[ConversationKey, Entry] = {}

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: ConversationKey) -> Entry | None:
        return self._entries.get(key)

    def _put(self, key: ConversationKey, mark_id: int | None) -> Entry | None:
        if key not in self._entries and len(self._entries) >= self.limit:
            self.overflow += 1
            return None
        self._seq += 1
        entry = self._entries[key] = Entry(self._seq, mark_id)
        return entry

    # ------------------------------------------------------------- marking
    def begin(self, keys: Iterable[ConversationKey]) -> dict[ConversationKey, Entry]:
        """A Redis write for ``keys`` failed: hold them as pending until
        :meth:`written`. Returns the entries made (keys beyond the limit have none)."""
        made = {}
        for key in keys:
            entry = self._put(key, None)
            if entry is not None:
                made[key] = entry
        return made

    def written(self, begun: Mapping[ConversationKey, Entry], mark_id: int) -> None:
        """The marks of :meth:`begin` are stored with ``mark_id``."""
        for key, entry in begun.items():
            if self._entries.get(key) == entry:
                self._seq += 1
                self._entries[key] = Entry(self._seq, mark_id)

    def learn(self, marks: Iterable[tuple[ConversationKey, int]]) -> None:
        """Marks read from the database: hold the unknown ones; a settled entry
        whose stored mark was replaced takes the new id. Pending entries stay."""
        for key, mark_id in marks:
            entry = self._entries.get(key)
            if entry is None or (not entry.pending and entry.mark_id != mark_id):
                self._put(key, mark_id)

    # ------------------------------------------------------------ clearing
    def snapshot(self) -> dict[ConversationKey, Entry]:
        """The settled entries (their marks are stored), as of now."""
        return {k: e for k, e in self._entries.items() if not e.pending}

    def take(self, touched: Iterable[ConversationKey], extra: int) -> dict[ConversationKey, Entry]:
        """The entries a write drops the lists of: every touched one, and up to
        ``extra`` others, oldest first."""
        taken = {k: e for k in touched if (e := self._entries.get(k)) is not None}
        for key, entry in self._entries.items():
            if extra <= 0:
                break
            if key not in taken:
                taken[key] = entry
                extra -= 1
        return taken

    def settle(
        self,
        seen: Mapping[ConversationKey, Entry],
        gone: Iterable[ConversationKey],
        moved: Mapping[ConversationKey, int] | None = None,
    ) -> int:
        """After the lists of ``seen`` were dropped or rebuilt (or the marks
        re-read): forget the ``gone`` entries (no mark left for them) and give
        the ``moved`` ones the id their mark has now — each only if its entry is
        still the one in ``seen``. Returns how many were forgotten."""
        forgotten = 0
        for key in gone:
            entry = seen.get(key)
            if entry is not None and not entry.pending and self._entries.get(key) == entry:
                del self._entries[key]
                forgotten += 1
        for key, mark_id in (moved or {}).items():
            entry = seen.get(key)
            if entry is not None and self._entries.get(key) == entry:
                self._seq += 1
                self._entries[key] = Entry(self._seq, mark_id)
        return forgotten
