"""What an erasure covers (events, sessions, memories): table-driven, no event loop."""

from __future__ import annotations

from datetime import datetime

import pytest

from streams.erasure.model import ErasureMark, MemorySource, Target
from streams.erasure.rules.coverage import ErasureIndex, EventPlace, covers

CUTOFF = datetime(2026, 12, 1, 12, 0, 0)
BEFORE, AFTER = datetime(2026, 12, 1, 11, 0), datetime(2026, 12, 1, 13, 0)


def mark(target: Target = "user", subject: str = "u1", tenant: str = "t1", *, seq: int = 1,
         offsets: dict[int, int] | None = None, source: MemorySource | None = None,
         erasure_id: str | None = None) -> ErasureMark:
    return ErasureMark(erasure_id or f"e-{target}-{subject}-{tenant}", tenant, target,
                       subject, CUTOFF, offsets if offsets is not None else {0: 100, 1: 50},
                       source, seq)


@pytest.mark.parametrize(("created_at", "places", "covered"), [
    (BEFORE, [], True),  # happened before the erasure
    (CUTOFF, [], True),  # at the cutoff
    (AFTER, [], False),  # a later event, from nowhere known: new
    (AFTER, [EventPlace(0, 99)], True),  # published before the erasure, its clock ahead
    (AFTER, [EventPlace(0, 100)], False),  # published after the erasure was recorded
    (AFTER, [EventPlace(1, 10)], True),
    (AFTER, [EventPlace(2, 0)], False),  # a partition the erasure did not see (added later)
    (BEFORE, [EventPlace(0, 5000)], True),  # re-driven long after, older than the cutoff
    # re-driven after the erasure (a new offset), first read before it: covered
    (AFTER, [EventPlace(0, 700), EventPlace(0, 3)], True),
])
def test_an_event_is_covered_by_time_or_by_offset(created_at: datetime,
                                                  places: list[EventPlace],
                                                  covered: bool) -> None:
    assert covers(mark(), created_at, places) is covered


@pytest.mark.parametrize(("marks", "tenant", "user", "conversations", "covered"), [
    ([mark("user", "u1")], "t1", "u1", ("c1",), True),
    ([mark("user", "u1")], "t1", "u2", ("c1",), False),  # another user
    ([mark("user", "u1")], "t2", "u1", ("c1",), False),  # the same user id, another tenant
    ([mark("conversation", "c1")], "t1", "u9", ("c1",), True),  # every speaker of it
    ([mark("conversation", "c1")], "t1", "u1", ("c2",), False),
    ([mark("conversation", "c1")], "t1", "u1", ("agent:x", "c1"), True),  # sub-agent chat
    ([mark("tenant", "t1")], "t1", "anyone", ("any",), True),
    ([mark("tenant", "t1")], "t2", "anyone", ("any",), False),
    ([mark("memory", "42", source=MemorySource("user_profile", "u1", frozenset({"e1"})))],
     "t1", "u1", ("c1",), False),  # a memory erasure covers no event
    ([], "t1", "u1", ("c1",), False),
])
def test_the_index_finds_the_erasure_of_an_event(marks: list[ErasureMark], tenant: str,
                                                 user: str, conversations: tuple[str, ...],
                                                 covered: bool) -> None:
    index = ErasureIndex(marks)
    found = index.event_covered(tenant, user, conversations, BEFORE)
    assert (found is not None) is covered


@pytest.mark.parametrize(("marks", "user", "conversations", "by_user", "without_users"), [
    ([mark("user", "u1")], "u1", ("c1",), True, False),  # only the user is erased
    ([mark("user", "u1"), mark("conversation", "c1")], "u1", ("c1",), True, True),
    ([mark("tenant", "t1")], "u1", ("c1",), True, True),
    ([mark("conversation", "c1")], "u2", ("c1",), True, True),
])
def test_a_users_erasure_can_be_told_from_one_of_the_conversation(
        marks: list[ErasureMark], user: str, conversations: tuple[str, ...], by_user: bool,
        without_users: bool) -> None:
    """A session end only a user erasure covers still closes its session for the users
    left; one an erasure of its conversation or tenant covers does not."""
    index = ErasureIndex(marks)
    assert (index.event_covered("t1", user, conversations, BEFORE) is not None) is by_user
    assert (index.event_covered("t1", user, conversations, BEFORE, users=False)
            is not None) is without_users


@pytest.mark.parametrize(("marks", "tenant", "user", "conversations", "named"), [
    ([mark("user", "u1")], "t1", "u1", ("c1",), True),  # whatever the event's time
    ([mark("user", "u1")], "t1", "u2", ("c1",), False),
    ([mark("user", "u1")], "t2", "u1", ("c1",), False),
    ([mark("conversation", "c1")], "t1", "u2", ("c2", "c1"), True),
    ([mark("tenant", "t1")], "t1", "u2", ("c2",), True),
    ([mark("memory", "42", source=MemorySource("user_profile", "u1", frozenset({"e1"})))],
     "t1", "u1", ("c1",), False),  # a memory erasure deletes no message
])
def test_the_index_names_the_subjects_whose_erased_events_are_looked_up(
        marks: list[ErasureMark], tenant: str, user: str, conversations: tuple[str, ...],
        named: bool) -> None:
    assert ErasureIndex(marks).names(tenant, user, conversations) is named


@pytest.mark.parametrize(("last_activity", "user", "conversation", "covered"), [
    (BEFORE, "u1", "c1", True),
    (AFTER, "u1", "c1", False),  # a session of the user after the erasure: new
    (BEFORE, "u2", "c1", False),
    (BEFORE, "u2", "gone", True),  # the erased conversation, whoever's session
])
def test_a_session_end_is_covered_up_to_the_cutoff(last_activity: datetime, user: str,
                                                   conversation: str, covered: bool) -> None:
    index = ErasureIndex([mark("user", "u1"), mark("conversation", "gone")])
    assert (index.session_covered("t1", user, conversation, last_activity)
            is not None) is covered


SOURCE = MemorySource("user_profile", "u1", frozenset({"e1", "e2"}))


@pytest.mark.parametrize(("cube", "user", "sources", "erased"), [
    ("user_profile", "u1", ("e1",), True),  # judged again from the same messages
    ("user_profile", "u1", ("e1", "e2"), True),
    ("user_profile", "u1", ("e1", "e3"), False),  # a message the erased memory had not
    ("user_profile", "u2", ("e1",), False),
    ("agent_a1", "u1", ("e1",), False),
    ("user_profile", "u1", (), False),  # nothing to tell it by
])
def test_a_candidate_that_would_bring_an_erased_memory_back(cube: str, user: str,
                                                            sources: tuple[str, ...],
                                                            erased: bool) -> None:
    index = ErasureIndex([mark("memory", "42", source=SOURCE)])
    assert (index.erased_memory("t1", cube, user, sources) is not None) is erased


EPISODE = MemorySource("user_profile", "u1", frozenset({"e1"}), "episode")
PASSAGE = MemorySource("user_profile", "u1", frozenset({"e1"}), "episode", (100, 200))
FACT = MemorySource("user_profile", "u1", frozenset({"e1"}), "fact")


@pytest.mark.parametrize(("source", "kind", "span", "erased"), [
    (EPISODE, "episode", None, True),
    (EPISODE, "fact", None, False),  # the fact judged from the erased episode's message
    (FACT, "episode", None, False),  # the episode of the erased fact's message
    (FACT, "fact", None, True),
    (SOURCE, "fact", None, True),  # recorded without a kind: every kind, as before
    (SOURCE, "episode", (0, 10), True),
    (EPISODE, None, None, True),  # a candidate of unknown kind: kept out
    (PASSAGE, "episode", (150, 300), True),  # a passage cut otherwise, overlapping
    (PASSAGE, "episode", (200, 300), False),  # the next passage of the message
    (PASSAGE, "episode", None, True),  # the whole message
    (EPISODE, "episode", (0, 10), True),  # a passage of the erased whole message
])
def test_only_the_erased_memorys_kind_and_part_are_kept_out(
        source: MemorySource, kind: str | None, span: tuple[int, int] | None,
        erased: bool) -> None:
    index = ErasureIndex([mark("memory", "42", source=source)])
    assert (index.erased_memory("t1", "user_profile", "u1", ("e1",), kind, span)
            is not None) is erased


def test_the_index_takes_each_erasure_once_and_follows_the_log() -> None:
    index = ErasureIndex()
    assert index.add(mark(seq=3)) and not index.add(mark(seq=3))
    assert index.add(mark("user", "u2", seq=7)) and len(index) == 2
    assert index.last_seq == 7 and ("t1", "e-user-u1-t1") in index
    # erasure ids are the tenant's own: the same id in another tenant is another erasure
    assert index.add(mark("user", "u1", "t2", seq=8, erasure_id="e-user-u1-t1"))
    assert len(index) == 3
