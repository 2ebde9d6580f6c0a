"""What ``memstream replay`` re-drives, and the headers it sends along."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from streams.adapters.kafka.replay import ReplayFilter, redrive_headers, replay_group, skip_reason


def test_replay_selects_by_source_tenant_and_time_and_drops_own_headers() -> None:
    since = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    base = [("memstream.source.topic", b"chat.messages"), ("traceparent", b"00-ab"),
            ("memstream.failed_at", b"2026-11-30T09:30:00+00:00")]
    value = b'{"tenant_id": "t1", "event_id": "e1"}'
    assert skip_reason(base, value, ReplayFilter()) is None
    assert skip_reason(base, value, ReplayFilter(tenant_id="t1", since=since)) is None
    assert skip_reason(base, value, ReplayFilter(tenant_id="t2")) == "other_tenant"
    assert skip_reason(base, b"\xff not json", ReplayFilter(tenant_id="t1")) == "other_tenant"
    assert skip_reason(base[1:], value, ReplayFilter()) == "no_source_topic"
    later = ReplayFilter(since=since + timedelta(hours=1))
    assert skip_reason(base, value, later) == "before_since"
    out = redrive_headers(base, "memory.dlq/3/17")
    assert out == [("traceparent", b"00-ab"), ("memstream.replayed_from", b"memory.dlq/3/17")]
    # where it was first read goes along (an erasure covers it by that offset), and
    # stays the first place when the record is dead-lettered and re-driven again
    placed = [*base, ("memstream.source.partition", b"2"), ("memstream.source.offset", b"41")]
    first = [("memstream.first.topic", b"chat.messages"), ("memstream.first.partition", b"2"),
             ("memstream.first.offset", b"41")]
    assert redrive_headers(placed, "memory.dlq/3/17")[1:4] == first
    again = [*first, ("memstream.source.topic", b"chat.messages"),
             ("memstream.source.partition", b"0"), ("memstream.source.offset", b"900")]
    assert redrive_headers(again, "memory.dlq/1/2")[:3] == first
    assert replay_group("memstream", None) == "memstream-replay"
    assert replay_group("memstream", "t1") == "memstream-replay.t1"
