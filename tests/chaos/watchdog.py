"""A memory limit like a pod's, kept from the outside as the kubelet keeps it.

:class:`RssWatchdog` reads the resident memory of a slot's worker — its whole
process group, as a container's cgroup counts every process in it — every
``every_s``; above ``limit_bytes`` it SIGKILLs the group and starts the slot
again, and counts a restart. A worker that exits on its own is started again
and counted too. ``peak`` is the largest resident size seen.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from tests.chaos.faults import Cluster, Slot

PAGE = os.sysconf("SC_PAGE_SIZE")


def group_rss(pgid: int) -> int:
    """Resident bytes of every process in process group ``pgid``."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        # after the command: state, ppid, pgrp, ... rss is the 24th field of stat
        if int(fields[2]) == pgid:
            total += int(fields[21]) * PAGE
    return total


class RssWatchdog:
    def __init__(self, cluster: Cluster, slot: Slot, limit_bytes: int,
                 every_s: float = 0.5) -> None:
        self.cluster = cluster
        self.slot = slot
        self.limit_bytes = limit_bytes
        self.every_s = every_s
        self.peak = 0
        self.restarts = 0
        self.reasons: list[str] = []

    @property
    def peak_mb(self) -> float:
        """The largest resident size seen, MiB."""
        return self.peak / 2**20

    def _note(self, what: str) -> None:
        self.reasons.append(what)
        self.cluster.timeline.note(what)

    async def run(self) -> None:
        """Until cancelled."""
        while True:
            process = self.slot.process
            if process is not None and process.proc is not None:
                if not process.alive:
                    self._note(f"{self.slot.name} exited ({process.proc.returncode}): restart")
                    await self._restart()
                    continue
                rss = await asyncio.to_thread(group_rss, process.proc.pid)
                self.peak = max(self.peak, rss)
                if rss > self.limit_bytes:
                    process.kill()
                    self._note(f"{self.slot.name} over the memory limit "
                               f"({rss / 2**20:.0f} MiB > {self.limit_bytes / 2**20:.0f} MiB): "
                               "SIGKILL, restart")
                    await self._restart()
                    continue
            await asyncio.sleep(self.every_s)

    async def _restart(self) -> None:
        self.restarts += 1
        await self.cluster.start(self.slot)
