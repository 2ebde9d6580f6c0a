"""When a session state is due for an idle check, and what a look decides:
table-driven, no event loop."""

from __future__ import annotations

import math

import pytest

from streams.session.rules.idle_due import (
    IdleTimes,
    Look,
    Sent,
    Watch,
    due,
    due_from,
    look,
    watch_of,
)

T = IdleTimes(timeout_s=60, resend_after_s=300, retention_s=3600)
NOW = 10_000.0


def state(quiet: float, *, open_: bool = True, outbox: bool = False, seq: int = 1) -> Watch:
    return Watch("t1", "c1", seq, NOW - quiet, open_, outbox)


@pytest.mark.parametrize(("w", "is_due"), [
    (state(59.9), False),  # open, idle less than the timeout
    (state(60), True),  # open, idle for the timeout
    (state(299, open_=False, outbox=True), False),  # closing event unsent, recent
    (state(300, open_=False, outbox=True), True),  # ... unsent for the resend interval
    (state(3599, open_=False), False),  # closed, empty, quiet less than the retention
    (state(3600, open_=False), True),  # ... for the retention: it leaves the table
])
def test_when_a_state_is_due(w: Watch, is_due: bool) -> None:
    assert due(w, NOW, T) is is_due
    at = due_from(w, T)
    assert at is not None and (at <= NOW) is is_due  # looked at from then on, never later


@pytest.mark.parametrize(("w", "times", "at"), [
    (state(0), T, NOW + 60),
    (state(0, open_=False, outbox=True), T, NOW + 300),
    (state(0, open_=False), T, NOW + 3600),
    (state(0, open_=False), IdleTimes(60, 300), None),  # no retention: never due
])
def test_due_from_is_a_hair_before_the_moment(w: Watch, times: IdleTimes,
                                              at: float | None) -> None:
    got = due_from(w, times)
    if at is None:
        assert got is None
    else:
        assert got is not None and got < at and math.nextafter(got, math.inf) == at
        assert due(w, at, times) and not due(w, got - 1, times)


SEEN: Sent = (1, NOW - 70, NOW - 10)  # a check sent 10 s ago for this session and activity


@pytest.mark.parametrize(("w", "sent", "expected"), [
    # not due: nothing sent, anything remembered forgotten, look again when due
    (state(10), SEEN, Look(False, None, math.nextafter(NOW + 50, -math.inf))),
    # due, nothing sent before: send, remember, look again after the resend interval
    (state(70), None, Look(True, (1, NOW - 70, NOW), math.nextafter(NOW + 300, -math.inf))),
    # due, sent 10 s ago for the same session: wait for the resend interval
    (state(70), SEEN, Look(False, SEEN, math.nextafter(NOW + 290, -math.inf))),
    # due, sent long ago: send again
    (state(70), (1, NOW - 70, NOW - 300), Look(True, (1, NOW - 70, NOW),
                                               math.nextafter(NOW + 300, -math.inf))),
    # due, the session moved on since the check: send for the new one
    (state(70, seq=2), SEEN, Look(True, (2, NOW - 70, NOW),
                                  math.nextafter(NOW + 300, -math.inf))),
])
def test_what_a_look_decides(w: Watch, sent: Sent | None, expected: Look) -> None:
    assert look(w, sent, NOW, T) == expected


@pytest.mark.parametrize(("value", "w"), [
    (None, None),
    ({"tenant_id": "t1", "conversation_id": "c1"}, Watch("t1", "c1", 1, 0.0, False, False)),
    ({"tenant_id": "t1", "conversation_id": "c1", "session_seq": 3, "last_seen_at": 5,
      "open": True, "outbox": ["{}"]}, Watch("t1", "c1", 3, 5.0, True, True)),
    ({"tenant_id": "t1", "conversation_id": "c1", "outbox": []},
     Watch("t1", "c1", 1, 0.0, False, False)),
])
def test_what_the_scan_reads_of_a_table_value(value: dict[str, object] | None,
                                              w: Watch | None) -> None:
    assert watch_of(value) == w
