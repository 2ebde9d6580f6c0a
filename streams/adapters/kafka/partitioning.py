"""The partition Java's default partitioner (and aiokafka's, and Faust's) picks
for a key: ``murmur2(key) & 0x7fffffff % partitions``."""

from __future__ import annotations

from collections.abc import Callable

from aiokafka.partitioner import murmur2


def java_partition(key: bytes, partitions: int) -> int:
    if partitions < 1:
        raise ValueError(f"a topic has at least one partition, not {partitions}")
    hashed: int = murmur2(key)
    return (hashed & 0x7FFFFFFF) % partitions


def home_partitions(partitions: int) -> Callable[[str], int]:
    """The home partition of a conversation id, for topics of ``partitions``."""
    def home(conversation_id: str) -> int:
        return java_partition(conversation_id.encode(), partitions)
    return home
