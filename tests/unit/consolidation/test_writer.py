"""What the writer adopts as the memory an interrupted attempt stored."""

from __future__ import annotations

from streams.consolidation.model import CandidateRow
from streams.consolidation.writer import same_memory
from streams.memory.model import MemoryCandidate, StoredMemory


def test_adoption_needs_the_same_text_and_sources() -> None:
    row = CandidateRow(0, "user_profile",
                       MemoryCandidate("I live in Rome.", source_event_ids=("e1",)))
    same = StoredMemory("m1", "i live in rome", "user_profile", source_event_ids=("e1",))
    assert same_memory(row, same)
    assert same_memory(row, StoredMemory("m2", "I live in Rome.", "user_profile"))
    assert not same_memory(row, StoredMemory("m3", "I live in Rome.", "user_profile",
                                             source_event_ids=("e9",)))
    assert not same_memory(row, StoredMemory("m4", "I live in Oslo.", "user_profile"))
