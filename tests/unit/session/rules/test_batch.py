"""What a batch does to session states: stamps, closes, outboxes, drops."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from streams.session.model import SessionState
from streams.session.rules.batch import BareEnd, SessionRules, SourcedEvent, plan_sessions
from streams.wire.records import ChatMessage, IdleCheck, SessionEnd

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
RULES = SessionRules(idle_timeout_s=60.0, retention_s=3600.0)
KEY = "t/c"


def msg(i: int, conv: str = "c") -> ChatMessage:
    return ChatMessage(event_id=f"{conv}-{i}", type="message", tenant_id="t", user_id="u",
                       agent_id="a", conversation_id=conv, role="user", content=f"m{i}",
                       created_at=T0 + timedelta(seconds=i))


def end(i: int, conv: str = "c") -> SessionEnd:
    return SessionEnd(event_id=f"{conv}-end-{i}", type="session_end", tenant_id="t",
                      user_id="u", agent_id="a", conversation_id=conv, created_at=T0)


def idle(conv: str = "c") -> IdleCheck:
    return IdleCheck(tenant_id="t", conversation_id=conv, session_seq=1, idle_for_s=61,
                     checked_at=T0)


def src(*events: Any, topic: str = "chat", start: int = 0) -> list[SourcedEvent]:
    return [SourcedEvent(topic, start + n, e) for n, e in enumerate(events)]


def table(**states: SessionState) -> dict[str, dict[str, object]]:
    return {k.replace("_", "/"): s.to_table() for k, s in states.items()}


# events (M: message i, E: session end), expected stamps per message, closed session numbers
STAMPS = [
    ("M0 M1", [1, 1], []),
    ("M0 M1 E", [1, 1], [1]),
    ("M0 E M1 M2 E", [1, 2, 2], [1, 2]),
    ("E M0", [1], []),            # an end with nothing in the session closes nothing
    ("M0 E E M1", [1, 2], [1]),
]


@pytest.mark.parametrize(("script", "stamps", "closed"), STAMPS)
def test_each_message_is_stamped_with_its_session(script: str, stamps: list[int],
                                                   closed: list[int]) -> None:
    events: list[Any] = []
    for n, word in enumerate(script.split()):
        events.append(msg(int(word[1:])) if word[0] == "M" else end(n))
    plan = plan_sessions(src(*events), {}.get, {}, now=1000.0, rules=RULES)
    msg_stamps = [plan.stamps[i] for i, e in enumerate(events) if isinstance(e, ChatMessage)]
    assert msg_stamps == stamps
    assert [c.session_seq for c in plan.closed] == closed
    assert [c.closed_id for c in plan.publish] == [f"t/c#{n}" for n in closed]


def test_a_conversation_whose_state_was_dropped_goes_on_numbering() -> None:
    plan = plan_sessions(src(msg(0), end(1)), {}.get, {KEY: 4}, now=1000.0, rules=RULES)
    assert plan.stamps[0] == 5
    assert [c.closed_id for c in plan.closed] == ["t/c#5"]
    assert plan.fresh == set()  # it has history in the database


def test_a_new_conversation_is_fresh() -> None:
    plan = plan_sessions(src(msg(0)), {}.get, {}, now=1000.0, rules=RULES)
    assert plan.fresh == {("t", "c")}


def test_an_unpublished_closing_event_is_published_again_with_the_next_touch() -> None:
    state = SessionState.new(msg(0))
    state.apply_message(msg(0), "chat", 0, now=10.0)
    closed = state.close("explicit", now=11.0, end=end(1))
    assert closed is not None and state.outbox
    current = table(t_c=state)
    # the redelivered session end: already applied (its offset is seen), nothing closes anew
    plan = plan_sessions(src(msg(0), end(1)), current.get, {}, now=12.0, rules=RULES)
    assert plan.closed == []
    assert [c.closed_id for c in plan.publish] == ["t/c#1"]


def test_a_published_event_leaves_the_outbox() -> None:
    state = SessionState.new(msg(0))
    state.apply_message(msg(0), "chat", 0, now=10.0)
    state.close("explicit", now=11.0, end=end(1))
    assert state.sent({"t/c#1"}) and state.outbox == []
    assert not state.sent({"t/c#1"})


# state (open?, seconds since the last event, outbox?, its records committed?), expected
# idle outcome, closed?, dropped?
IDLE = [
    ((True, 30.0, False, True), "idle_active", False, False),
    ((True, 61.0, False, True), "idle_closed", True, False),
    ((False, 61.0, False, True), "idle_active", False, False),
    ((False, 61.0, True, True), "idle_outbox", False, False),
    ((False, 3601.0, True, True), "idle_outbox", False, False),  # never with an event unsent
    ((False, 3601.0, False, True), "idle_expired", False, True),
    # a record applied to it not committed yet: delivered again, it must find the state
    ((False, 3601.0, False, False), "idle_uncommitted", False, False),
]


@pytest.mark.parametrize(("shape", "outcome", "closes", "drops"), IDLE)
def test_idle_checks_are_rechecked_against_the_state(
    shape: tuple[bool, float, bool, bool], outcome: str, closes: bool, drops: bool
) -> None:
    is_open, quiet, unsent, committed = shape
    state = SessionState.new(msg(0))
    state.apply_message(msg(0), "chat", 0, now=100.0)
    if not is_open:
        state.close("explicit", now=100.0, end=end(1))
        if not unsent:
            state.sent({"t/c#1"})
    plan = plan_sessions(src(idle(), topic="idle"), table(t_c=state).get, {},
                         now=100.0 + quiet, rules=RULES, durable=lambda s: committed)
    assert plan.outcomes[0] == outcome
    assert bool(plan.closed) == closes
    assert (KEY in plan.expired) == drops
    if drops:
        assert plan.expired[KEY] == 1  # the last closed session is remembered


def test_a_replayed_idle_check_changes_nothing() -> None:
    state = SessionState.new(msg(0))
    state.apply_message(msg(0), "chat", 0, now=100.0)
    state.mark("idle", 7)
    plan = plan_sessions(src(idle(), topic="idle", start=7), table(t_c=state).get, {},
                         now=1000.0, rules=RULES)
    assert plan.outcomes[0] == "idle_replayed" and plan.closed == []


def test_an_idle_check_for_a_state_the_table_does_not_hold_is_ignored() -> None:
    plan = plan_sessions(src(idle(), topic="idle"), {}.get, {}, now=1000.0, rules=RULES)
    assert plan.outcomes[0] == "idle_unknown" and plan.states == {}


def test_a_message_after_an_expiry_check_keeps_the_state() -> None:
    state = SessionState.new(msg(0))
    state.apply_message(msg(0), "chat", 0, now=100.0)
    state.close("explicit", now=100.0, end=end(1))
    state.sent({"t/c#1"})
    events = [SourcedEvent("idle", 0, idle()), SourcedEvent("chat", 5, msg(5))]
    plan = plan_sessions(events, table(t_c=state).get, {}, now=100.0 + 4000, rules=RULES)
    assert plan.expired == {} and plan.stamps[1] == 2


# offsets of the chat topic, the session each belongs to after three closes
BOUNDS = [(0, 1), (4, 1), (5, 2), (9, 2), (10, 3), (12, 4)]


def test_each_offset_belongs_to_the_session_current_there() -> None:
    state = SessionState.new(msg(0))
    for close_at in (4, 9, 11):  # a session_end at these offsets
        state.apply_message(msg(close_at - 1), "chat", close_at - 1, now=1.0)
        state.mark("chat", close_at)
        state.close("explicit", now=2.0, end=end(close_at))
    assert [(o, state.session_of("chat", o)) for o, _ in BOUNDS] == BOUNDS
    assert state.session_of("sub", 3) == state.session_seq  # no close seen there


def test_only_the_newest_session_starts_are_kept() -> None:
    state = SessionState.new(msg(0))
    for n in range(10):
        state.apply_message(msg(2 * n), "chat", 2 * n, now=1.0)
        state.mark("chat", 2 * n + 1)
        state.close("explicit", now=2.0, end=end(n))
    assert len(state.bounds["chat"]) == 4
    assert state.session_of("chat", 19) == 10 and state.session_of("chat", 17) == 9


def test_a_message_passed_over_is_stamped_with_its_session_and_is_a_late_candidate() -> None:
    # offset 1 was passed over; the state went on to close session 1 at offset 3
    events = src(msg(0), msg(1), msg(2), end(3), msg(4))
    first = plan_sessions([e for e in events if e.offset != 1], {}.get, {}, now=10.0,
                          rules=RULES)
    state = first.states[KEY]
    again = plan_sessions(events[1:], table(t_c=state).get, {}, now=11.0, rules=RULES)
    assert again.stamps[0] == 1  # offset 1: session 1, closed already
    assert again.late == {KEY: {1: [0, 1]}}  # offsets 1 and 2, of the closed session
    assert again.stamps[3] == 2  # offset 4 (seen too): session 2, still open
    assert again.closed == []


def test_a_bare_end_closes_the_open_session_under_the_states_ids() -> None:
    """The session end of an erased user, stripped of its sender, closes the session for
    the users left: the closing event carries the state's ids, none of the end's."""
    first = plan_sessions(src(msg(0), msg(1)), lambda k: None, {}, 0.0, RULES)
    state = first.states[KEY]
    state.user_id, state.agent_id = "u2", "a2"  # the last speaker: another user
    plan = plan_sessions([SourcedEvent("chat", 5, BareEnd("t", "c"))],
                         table(t_c=state).get, {}, 10.0, RULES)
    assert plan.outcomes == {0: "session_end"}
    [closed] = plan.closed
    assert (closed.user_id, closed.agent_id, closed.trigger, closed.session_seq,
            closed.message_count) == ("u2", "a2", "explicit", 1, 2)
    assert plan.states[KEY].open is False and plan.states[KEY].stream_time == state.stream_time
    again = plan_sessions([SourcedEvent("chat", 5, BareEnd("t", "c"))],
                          table(t_c=plan.states[KEY]).get, {}, 11.0, RULES)
    assert again.closed == []  # delivered again: nothing more


def test_a_bare_end_without_a_state_starts_none() -> None:
    """A conversation only the erased user spoke in has no state any more: nothing is
    closed, and no state holding anything of the end is made."""
    plan = plan_sessions([SourcedEvent("chat", 0, BareEnd("t", "c"))], lambda k: None,
                         {KEY: 3}, 0.0, RULES)
    assert plan.outcomes == {0: "erased"} and plan.states == {} and plan.closed == []


@pytest.mark.parametrize(("script", "causes"), [
    ("M0 M1 E M3", {"t/c#1": 2}),              # the end, not the batch's last record
    ("M0 E M1 E", {"t/c#1": 1, "t/c#2": 3}),  # two closes, each by its own end
    ("M0 M200", {"t/c#1": 1}),                 # a gap in event time: the message after it
])
def test_the_plan_names_the_item_that_closed_each_session(script: str,
                                                          causes: dict[str, int]) -> None:
    events: list[Any] = [msg(int(w[1:])) if w[0] == "M" else end(n)
                         for n, w in enumerate(script.split())]
    plan = plan_sessions(src(*events), {}.get, {}, now=1000.0, rules=RULES)
    assert plan.causes == causes


def test_an_idle_check_is_the_cause_of_its_close() -> None:
    state = SessionState.new(msg(0))
    state.apply_message(msg(0), "chat", 0, now=100.0)
    plan = plan_sessions(src(idle(), topic="idle"), table(t_c=state).get, {}, now=1000.0,
                         rules=RULES)
    assert plan.causes == {"t/c#1": 0}
