"""Sessions in event time: the gap between ``created_at`` values ends a session,
whatever the wall clock did, with a grace for out-of-order messages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from streams.session.model import SessionState
from streams.session.rules.batch import SessionRules, SourcedEvent, plan_sessions
from streams.wire.records import ChatMessage, SessionEnd

T0 = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
GAP = 1800.0
NOW = (T0 + timedelta(days=10)).timestamp()  # the worker's clock


def at(seconds: float, n: int) -> ChatMessage:
    return ChatMessage(event_id=f"e{n}", type="message", tenant_id="t", user_id="u",
                       agent_id="a", conversation_id="c", role="user", content=f"m{n}",
                       created_at=T0 + timedelta(seconds=seconds))


def end_at(seconds: float) -> SessionEnd:
    return SessionEnd(event_id="end", type="session_end", tenant_id="t", user_id="u",
                      agent_id="a", conversation_id="c",
                      created_at=T0 + timedelta(seconds=seconds))


def plan(events: list[Any], grace_s: float = 300.0, current: Any = None) -> Any:
    rules = SessionRules(idle_timeout_s=GAP, retention_s=86400.0, grace_s=grace_s)
    return plan_sessions([SourcedEvent("chat", n, e) for n, e in enumerate(events)],
                         (current or {}).get, {}, now=NOW, rules=rules)


def stamps(p: Any, events: list[Any]) -> list[int]:
    return [p.stamps[i] for i, e in enumerate(events) if isinstance(e, ChatMessage)]


DAY = 86400.0
# event times in seconds (E: a session end at that time), stamps, closed sessions
CASES = [
    ("within the gap", [0, 600, 1700], [1, 1, 1], []),
    ("three days, four a day", [0, 60, 120, 180, DAY, DAY + 60, DAY + 120, DAY + 180,
                                2 * DAY, 2 * DAY + 60, 2 * DAY + 120, 2 * DAY + 180],
     [1] * 4 + [2] * 4 + [3] * 4, [1, 2]),
    ("exactly the gap ends it", [0, GAP], [1, 2], [1]),
    ("out of order inside a session", [0, 600, 300], [1, 1, 1], []),
    ("an end after the gap closes by the gap, then nothing", [0, 60, "E5000"], [1, 1], [1]),
    ("an end within the gap closes explicitly", [0, 60, "E120", 200], [1, 1, 2], [1]),
]


@pytest.mark.parametrize(("times", "want", "closed"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_a_gap_in_event_time_ends_the_session(times: list[Any], want: list[int],
                                              closed: list[int]) -> None:
    events = [end_at(float(t[1:])) if isinstance(t, str) else at(t, n)
              for n, t in enumerate(times)]
    p = plan(events)
    assert stamps(p, events) == want
    assert [c.session_seq for c in p.closed] == closed


def test_a_gap_close_says_idle_with_the_session_s_own_last_activity() -> None:
    p = plan([at(0, 0), at(60, 1), at(DAY, 2)])
    (closed,) = p.closed
    assert closed.trigger == "idle" and closed.message_count == 2
    assert closed.last_activity == T0 + timedelta(seconds=60)


@pytest.mark.parametrize(("grace_s", "want", "late"), [
    (300.0, [1, 2, 1], {1}),   # 100 s behind stream time: joins its own session, late
    (50.0, [1, 2, 2], set()),  # beyond the grace: goes with the open session
    (0.0, [1, 2, 2], set()),
])
def test_an_out_of_order_message_within_the_grace_joins_the_session_before(
        grace_s: float, want: list[int], late: set[int]) -> None:
    events = [at(0, 0), at(GAP + 10, 1), at(GAP - 90, 2)]
    p = plan(events, grace_s)
    assert stamps(p, events) == want
    assert set(p.late.get("t/c", {})) == late
    state = p.states["t/c"]
    assert state.session_message_count == (1 if late else 2)


def test_a_message_older_than_the_previous_session_s_gap_goes_with_the_open_one() -> None:
    events = [at(0, 0), at(3 * GAP, 1), at(2 * GAP, 2)]  # a gap after session 1 ended
    assert stamps(plan(events, grace_s=2 * GAP), events) == [1, 2, 2]


def test_a_passed_over_message_before_the_gap_event_is_in_the_session_before() -> None:
    rules = SessionRules(idle_timeout_s=GAP, retention_s=86400.0)
    # offset 1 passed over (delivered later)
    first = plan_sessions([SourcedEvent("chat", 0, at(0, 0)), SourcedEvent("chat", 2, at(DAY, 2))],
                          {}.get, {}, now=NOW, rules=rules)
    state = first.states["t/c"]
    assert state.session_of("chat", 1) == 1 and state.session_of("chat", 2) == 2


def test_the_window_state_survives_the_table() -> None:
    p = plan([at(0, 0), at(DAY, 1)])
    again = SessionState.from_table(p.states["t/c"].to_table())
    assert again is not None
    assert again.session_start == T0 + timedelta(seconds=DAY)
    assert again.previous_until == T0 + timedelta(seconds=GAP)
    assert again.stream_time == T0 + timedelta(seconds=DAY)


def test_a_burst_and_the_same_events_one_by_one_make_the_same_sessions() -> None:
    times = [0, 60, DAY, DAY + 30, DAY + 4000, 3 * DAY]
    events = [at(t, n) for n, t in enumerate(times)]
    burst = plan(events)
    table: dict[str, Any] = {}
    one_by_one = []
    for n, e in enumerate(events):
        rules = SessionRules(idle_timeout_s=GAP, retention_s=86400.0, grace_s=300.0)
        p = plan_sessions([SourcedEvent("chat", n, e)], table.get, {}, now=NOW + n,
                          rules=rules)
        one_by_one.append(p.stamps[0])
        table["t/c"] = p.states["t/c"].to_table()
    assert stamps(burst, events) == one_by_one == [1, 1, 2, 2, 3, 4]


@pytest.mark.parametrize(("after_end", "want", "late"), [
    (50.0, 1, True),     # written before the end, delivered after it (another partition)
    (100.0, 2, False),   # the end's own time: the next session
    (150.0, 2, False),
])
def test_a_message_older_than_the_session_end_joins_the_session_it_ended(
        after_end: float, want: int, late: bool) -> None:
    events = [at(0, 0), end_at(100), at(after_end, 1)]
    p = plan(events)
    assert stamps(p, events) == [1, want]
    assert bool(p.late) is late
    assert [c.trigger for c in p.closed] == ["explicit"]


def test_a_session_the_scan_closed_takes_nothing_more() -> None:
    state = SessionState.new(at(0, 0))
    state.apply_message(at(0, 0), "chat", 0, now=10.0)
    state.close("idle", now=NOW)
    rules = SessionRules(idle_timeout_s=GAP, retention_s=86400.0, grace_s=300.0)
    p = plan_sessions([SourcedEvent("chat", 1, at(-10, 1))], {"t/c": state.to_table()}.get,
                      {}, now=NOW + 1, rules=rules)
    assert p.stamps[0] == 2 and not p.late


def test_the_gap_is_measured_from_the_open_session_s_own_messages() -> None:
    # the session ended at 1000 takes nothing more; the next one is at 500 (too far
    # behind for the grace), and 2400 is a gap after it, not after 1000
    events = [at(0, 0), at(1000, 1), end_at(1000), at(500, 2), at(2400, 3)]
    assert stamps(plan(events), events) == [1, 1, 2, 3]
