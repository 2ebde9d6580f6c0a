"""The identity of a persisted candidate."""

from __future__ import annotations

from streams.adapters.db.runs import candidate_hash
from streams.memory.model import MemoryCandidate


def test_candidate_hash_separates_cubes_kinds_and_sources() -> None:
    c = MemoryCandidate("I live in Rome.", source_event_ids=("e1",))
    assert candidate_hash("user_profile", c) != candidate_hash("agent_a", c)
    assert candidate_hash("user_profile", c) != candidate_hash(
        "user_profile", MemoryCandidate("I live in Rome.", source_event_ids=("e2",)))
    assert candidate_hash("user_profile", c) != candidate_hash(
        "user_profile", MemoryCandidate("I live in Rome.", source_event_ids=("e1",),
                                        kind="episode"))
