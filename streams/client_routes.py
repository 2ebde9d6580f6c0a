"""Where a hedged query goes: a partition of the query topic held by another
member of the query group than the one holding the first copy.

``hedge_partition`` is the rule (pure); ``GroupOwners`` reads the query group's
current assignment from the broker (``DescribeGroups``) and keeps it fresh in
the background, so choosing a partition never waits on the network.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment

log = logging.getLogger(__name__)

Owners = Mapping[int, str]
"""Partition of the query topic -> the member (its id) that holds it."""


def hedge_partition(first: int, owners: Owners | None, count: int,
                    pick: Callable[[list[int]], int]) -> int | None:
    """The partition for a second copy of a request whose first copy went to ``first``.

    With the group's assignment known: a partition held by another member (``pick``
    chooses among them); None when one member holds every partition (a copy would
    wait where the first waits). Unknown: the next partition, which the query
    group's round-robin assignment gives to another member whenever there are two.
    """
    if count < 2:
        return None
    if owners:
        holder = owners.get(first)
        others = sorted(p for p, member in owners.items() if member != holder and p < count)
        return pick(others) if others else None
    return (first + 1) % count


def owners_from(groups: list[Any], topic: str) -> dict[int, str]:
    """The partitions of ``topic`` by member, from the raw ``DescribeGroups`` answers."""
    owners: dict[int, str] = {}
    for response in groups:
        for group in response.groups:
            error_code, state, members = group[0], group[2], group[5]
            if error_code or state != "Stable":
                continue
            for member in members:
                member_id, raw = member[0], member[-1]
                if not raw:
                    continue
                assignment = ConsumerProtocolMemberAssignment.decode(raw)
                for name, partitions in assignment.assignment:
                    if name == topic:
                        owners.update(dict.fromkeys(partitions, member_id))
    return owners


class GroupOwners:
    """The query group's assignment of ``topic``, read every ``every_s`` seconds.

    ``owners`` is the last stable assignment read (empty until one is); a group
    that is rebalancing or cannot be described keeps the last one."""

    def __init__(self, servers: list[str], options: dict[str, Any], group: str, topic: str,
                 every_s: float = 2.0) -> None:
        self.group = group
        self.topic = topic
        self.every_s = every_s
        self.owners: dict[int, str] = {}
        self._admin = AIOKafkaAdminClient(bootstrap_servers=servers, **options)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._admin.start()
        await self.refresh()
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def refresh(self) -> None:
        try:
            described = await self._admin.describe_consumer_groups([self.group])
        except Exception as exc:  # the broker's answer is a hint; the fallback rule holds
            log.debug("describing the query group %s failed: %r", self.group, exc)
            return
        found = owners_from(described, self.topic)
        if found:
            self.owners = found

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.every_s)
            await self.refresh()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._admin.close()
