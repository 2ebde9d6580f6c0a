"""What a cache let go of since a read began, so that the read holds nothing dropped.

A cache numbers its drops (:attr:`Drops.generation`); a load or search notes the
number before its reads begin and, once it has read, asks :meth:`Drops.since`
what was dropped meanwhile: what that covers serves its caller and is not held
(it may be erased). A drop names what goes (:class:`~streams.memory.model.HeldScopes`):
a read of another tenant's scope is held as usual. The newest ``kept`` drops are
remembered; a read older than those is told everything went, as after a
:meth:`Drops.clear`.
"""

from __future__ import annotations

from collections import deque

from streams.memory.model import HeldScopes

KEPT = 64  # drops remembered for the reads in flight


class Drops:
    def __init__(self, kept: int = KEPT) -> None:
        self.generation = 0  # one more at each drop or clear
        self._floor = 0  # a read begun before this generation: everything went
        self._log: deque[tuple[int, HeldScopes]] = deque()
        self._kept = kept

    def clear(self) -> None:
        """Everything went."""
        self.generation += 1
        self._floor = self.generation
        self._log.clear()

    def drop(self, what: HeldScopes) -> None:
        self.generation += 1
        if len(self._log) >= self._kept:
            forgotten, _ = self._log.popleft()
            self._floor = max(self._floor, forgotten)
        self._log.append((self.generation, what))

    def since(self, generation: int) -> list[HeldScopes] | None:
        """What went after ``generation``; None: everything (may have)."""
        if generation < self._floor:
            return None
        return [what for g, what in self._log if g > generation]
