"""The worker's book of model usage: per hour and agent, bounded, today's tokens."""

from __future__ import annotations

from streams.model_usage.book import Totals, UsageBook

HOUR = 3_600.0
DAY = 86_400.0


def used(tokens_in: int, tokens_out: int = 0, cost: float = 0.0) -> Totals:
    return Totals(input_tokens=tokens_in, output_tokens=tokens_out, calls=1, cost=cost)


def test_a_view_has_every_hour_and_ranks_agents_by_cost_then_tokens() -> None:
    book = UsageBook()
    now = 10 * DAY + 5 * HOUR
    book.add("t1", "cheap", now - 2 * HOUR, used(5000))
    book.add("t1", "dear", now, used(10, 10, cost=1.0))
    book.add("t1", "dear", now, used(10, 0, cost=0.5))
    book.add("t2", "other-tenant", now, used(1, 1, cost=9.0))
    view = book.view("t1", now, hours=3, top=5)
    assert [i["tokens"] for i in view["items"]] == [5000, 0, 30]
    assert view["items"][0]["hour"] == "1970-01-11T03:00:00Z"
    assert (view["from"], view["to"]) == ("1970-01-11T03:00:00Z", "1970-01-11T06:00:00Z")
    assert [a["agent_id"] for a in view["top_agents"]] == ["dear", "cheap"]
    assert view["total"] == {"input_tokens": 5020, "output_tokens": 10, "tokens": 5030,
                             "calls": 3, "failures": 0, "cost": 1.5}
    assert book.view("t1", now, hours=3, top=1)["top_agents"][0]["agent_id"] == "dear"


def test_today_starts_at_zero_each_utc_day() -> None:
    book = UsageBook()
    book.add("t1", "a", DAY - 1, used(100, 20))
    assert book.spent_today("t1", DAY - 1) == 120
    assert book.spent_today("t1", DAY) == 0
    book.add("t1", "a", DAY + 1, used(7))
    assert book.spent_today("t1", DAY + 2) == 7


def test_tenants_agents_and_hours_are_bounded() -> None:
    book = UsageBook(max_tenants=2, keep_hours=2, max_agents=2)
    for t in ("t1", "t2", "t3"):
        book.add(t, "a", 0.0, used(1))
    # the least recently seen tenant's hours are forgotten, not its tokens of the day
    # (forgetting them would reset its budget)
    assert book.view("t1", 0.0, hours=1, top=9)["total"]["tokens"] == 0
    assert book.spent_today("t1", 0.0) == 1
    assert book.spent_today("t1", 86_400.0) == 0  # a new UTC day
    for agent in ("a", "b", "c", "d"):
        book.add("t3", agent, 0.0, used(1))
    assert sorted(a["agent_id"] for a in book.view("t3", 0.0, hours=1, top=9)["top_agents"]) \
        == ["a", "b", "other"]
    book.add("t3", "a", 5 * HOUR, used(1))
    assert book.view("t3", 5 * HOUR, hours=48, top=9)["total"]["tokens"] == 1


def test_the_days_tokens_are_bounded_too() -> None:
    book = UsageBook(max_day_tenants=2)
    for t in ("t1", "t2", "t3"):
        book.add(t, "a", 0.0, used(1))
    assert [book.spent_today(t, 0.0) for t in ("t1", "t2", "t3")] == [1, 1, 0]
