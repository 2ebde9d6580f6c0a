from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streams.memory.model import USER_CUBE, StoredMemory, agent_cube
from streams.query.rules.budget import filter_and_trim, memory_line, pack_budget
from streams.tokens import TokenCounter

AGENT = agent_cube("helper")
DAY = datetime(2024, 3, 1, 9, 30, tzinfo=UTC)


def words(text: str) -> int:
    """A token counter for tests: one token per word and per newline."""
    return len(text.split()) + text.count("\n")


def mem(mid: str, score: float, content: str | None = None, *, cube: str = USER_CUBE,
        days: int = 0, **kw: Any) -> StoredMemory:
    return StoredMemory(id=mid, content=content or f"memory {mid}", cube=cube, score=score,
                        event_time=DAY + timedelta(days=days), **kw)


def sized(mid: str, score: float, n_words: int, **kw: Any) -> StoredMemory:
    """A fact whose line ``[date] w w ...`` costs ``n_words + 1`` words plus one newline."""
    return mem(mid, score, " ".join([mid] * n_words), **kw)


def test_filter_drops_scores_below_threshold_and_sorts() -> None:
    got = filter_and_trim([mem("a", 0.29), mem("b", 0.3), mem("c", 0.9), mem("d", 0.5)])
    assert [m.id for m in got] == ["c", "d", "b"]


def test_filter_cuts_each_memory_to_1000_characters() -> None:
    got = filter_and_trim([mem("a", 0.9, "x" * 1500), mem("b", 0.8, "y" * 1000)])
    assert [len(m.content) for m in got] == [1000, 1000]
    assert filter_and_trim([mem("a", 0.9, "abcdef")], max_chars=3)[0].content == "abc"


def test_user_profile_stops_at_60_percent_on_a_whole_line_when_the_agent_has_enough() -> None:
    # each user line costs 18 + 1 = 19 words + 1 newline = 20 of a 100-token budget
    user = [sized(f"u{i}", 1.0 - i / 10, 18) for i in range(5)]
    agent = [sized(f"a{i}", 0.05, 18, cube=AGENT) for i in range(3)]  # more than its 40
    packed = pack_budget(user + agent, budget_tokens=100, count=words)
    assert [m.id for m in packed.included] == ["u0", "u1", "u2", "a0", "a1"]
    lines = packed.user_profile.split("\n")
    assert len(lines) == 3
    assert all(line.split()[1:] == [f"u{i}"] * 18 for i, line in enumerate(lines))
    assert packed.tokens_used == 3 * 19 + 2 + 2 * 19 + 1  # three lines, then two


@pytest.mark.parametrize(("user_lines", "agent_lines", "user_in", "agent_in"), [
    (5, 0, 5, 0),  # no agent memory: user_profile takes the whole budget
    (5, 1, 4, 1),  # the agent needs 19 of its 40: user_profile may take 81
    (1, 5, 1, 4),  # user_profile needs 19 of its 60: the agent may take 81
    (5, 5, 3, 2),  # both have enough: 60 / 40
    (0, 5, 0, 5),  # nothing for user_profile: the agent takes the whole budget
    (5, -1, 5, 0),  # one agent memory too large for its share: user_profile takes the rest
])
def test_a_cube_that_cannot_fill_its_share_leaves_the_rest_to_the_other(
        user_lines: int, agent_lines: int, user_in: int, agent_in: int) -> None:
    user = [sized(f"u{i}", 0.9 - i / 100, 18) for i in range(user_lines)]
    agent = [sized(f"a{i}", 0.5 - i / 100, 18, cube=AGENT) for i in range(agent_lines)]
    if agent_lines < 0:
        agent = [sized("giant", 0.95, 60, cube=AGENT)]
    packed = pack_budget(user + agent, budget_tokens=100, count=words)
    got = [m.id for m in packed.included]
    assert (sum(i.startswith("u") for i in got), sum(i.startswith("a") for i in got)) == (
        user_in, agent_in)
    assert packed.tokens_used <= 100


def test_the_agent_cube_gets_the_rest_plus_what_user_profile_left() -> None:
    user = [sized("u0", 0.9, 18)]  # 19 words used of the 60 allowed
    agent = [sized(f"a{i}", 0.8 - i / 10, 18, cube=AGENT) for i in range(5)]
    packed = pack_budget(user + agent, budget_tokens=100, count=words)
    # 100 - 19 = 81 for the agent cube: four lines of 20
    assert [m.id for m in packed.included] == ["u0", "a0", "a1", "a2", "a3"]
    assert packed.agent_memory.count("\n") == 3
    assert packed.tokens_used == 19 + 4 * 19 + 3  # and the agent block's three newlines


def test_a_memory_too_big_is_skipped_and_a_smaller_one_still_fits() -> None:
    got = pack_budget([sized("big", 0.9, 110), sized("small", 0.5, 5)], budget_tokens=100,
                      count=words)
    assert [m.id for m in got.included] == ["small"]
    assert "big" not in got.user_profile


def test_every_fact_line_carries_its_event_date() -> None:
    got = pack_budget([mem("a", 0.9, "likes tea", days=0), mem("b", 0.8, "moved", days=40)],
                      count=words)
    assert got.user_profile.split("\n") == ["[2024-03-01] likes tea", "[2024-04-10] moved"]


def episode(mid: str, score: float, session: str, seq: int, days: int) -> StoredMemory:
    return mem(mid, score, f"Speaker: turn {mid}", kind="episode", days=days,
               metadata={"session": session, "seq": seq})


def test_episodes_are_packed_as_dated_session_blocks_in_date_order() -> None:
    ms = [
        episode("late-2", 0.9, "s2", 2, days=10),
        episode("early-1", 0.8, "s1", 1, days=0),
        episode("late-0", 0.7, "s2", 0, days=10),
        episode("early-0", 0.6, "s1", 0, days=0),
    ]
    got = pack_budget(ms, count=words)
    assert got.user_profile.split("\n") == [
        "[2024-03-01]", "Speaker: turn early-0", "Speaker: turn early-1",
        "[2024-03-11]", "Speaker: turn late-0", "Speaker: turn late-2",
    ]
    assert [m.id for m in got.included] == ["late-2", "early-1", "late-0", "early-0"]


def test_episode_selection_is_by_score_and_headers_are_paid_once() -> None:
    # header "[date]" = 1 word + newline, turn = 3 words + newline
    ms = [episode(f"t{i}", 1.0 - i / 10, "s1", i, days=0) for i in range(6)]
    ms.append(episode("other", 0.05, "s0", 0, days=-5))
    ms += [sized(f"a{i}", 0.01, 5, cube=AGENT) for i in range(3)]  # the agent fills its 12
    got = pack_budget(ms, budget_tokens=30, count=words)  # 18 for user_profile
    assert [m.id for m in got.included if m.cube == USER_CUBE] == ["t0", "t1", "t2", "t3"]
    assert got.user_profile.count("[2024-03-01]") == 1


def test_facts_come_before_episode_blocks() -> None:
    got = pack_budget([episode("e", 0.9, "s1", 0, days=0), mem("f", 0.1, "a fact")],
                      count=words)
    assert got.user_profile.split("\n") == ["[2024-03-01] a fact", "[2024-03-01]",
                                            "Speaker: turn e"]


@pytest.mark.parametrize("budget", [50, 400, 4000])
def test_real_tokens_never_exceed_the_budget(budget: int) -> None:
    count = TokenCounter()
    ms = [mem(f"u{i}", 1 - i / 500, f"Alice said thing number {i}: " + "blah " * (i % 13),
              days=i % 9) for i in range(300)]
    ms += [mem(f"a{i}", 0.5, f"agent note {i}", cube=AGENT) for i in range(300)]
    got = pack_budget(ms, budget_tokens=budget, count=count)
    assert count(got.user_profile) <= int(budget * 0.6)
    assert got.tokens_used == count(got.user_profile) + count(got.agent_memory) <= budget


def test_a_fact_restating_turns_already_shown_costs_no_tokens() -> None:
    turn = replace(episode("e", 0.9, "s1", 0, days=0), source_event_ids=("ev-1",))
    restated = mem("f", 0.5, "turn e restated", source_event_ids=("ev-1",))
    other = mem("g", 0.4, "another fact", source_event_ids=("ev-1", "ev-2"))
    got = pack_budget([turn, restated, other], count=words)
    assert [m.id for m in got.included] == ["e", "g"]
    # ranked above its turn, the fact is shown: nothing is known to cover it yet
    first = pack_budget([replace(restated, score=0.95), turn], count=words)
    assert [m.id for m in first.included] == ["f", "e"]


LINES = [
    "[2024-03-01]", "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "Melanie: Wow, that's cool!", "ok.", "x:", "Did you see it?!", "(note 42).", "--", "a",
    "我喜欢在周末去爬山。", "emoji 😀 at the end 😀", "tab\tinside", "100,000 memories", "'quoted'",
    "[2023-05-08] The user likes coffee in Lisbon and mentioned wine (note 7).", "...",
]


def test_the_tokens_used_are_the_real_count_of_the_blocks() -> None:
    """Counted line by line while choosing, the total is tiktoken's count of each whole
    block: facts, session headers (dated by the session's first turn, which may not be
    the first chosen) and turns, in any mix."""
    count = TokenCounter()
    rng = random.Random(5)
    for _ in range(300):
        ms = []
        for i in range(rng.randint(1, 14)):
            text, score, cube = rng.choice(LINES), rng.random(), rng.choice([USER_CUBE, AGENT])
            if rng.random() < 0.5:
                ms.append(mem(f"f{i}", score, text, cube=cube, days=rng.randint(0, 3)))
            else:
                ms.append(mem(f"e{i}", score, text, cube=cube, kind="episode",
                              days=rng.randint(0, 3), metadata={
                                  "session": rng.choice("ab"), "seq": rng.randint(0, 5)}))
        got = pack_budget(ms, budget_tokens=rng.choice([20, 60, 4000]), count=count)
        assert got.tokens_used == count(got.user_profile) + count(got.agent_memory)


@given(st.sampled_from(["fact", "episode"]), st.text(min_size=1, max_size=60),
       st.booleans(), st.integers(1, 80))
def test_a_memory_costs_the_count_of_its_memory_line(kind: str, content: str, dated: bool,
                                                     max_chars: int) -> None:
    """What a scope's load counts ahead (``memory_line`` of the cut content) is the text the
    budget counts for the memory: never a text of its own."""
    seen: list[str] = []

    def count(text: str) -> int:
        seen.append(text)
        return 1

    m = replace(mem("m", 0.9, content, kind=kind, metadata={"session": "s1", "seq": 0}),
                event_time=DAY if dated else None)
    pack_budget(filter_and_trim([m], min_score=0, max_chars=max_chars), count=count)
    assert seen[0] == memory_line(kind, content[:max_chars], m.event_time)


SPACES = [" ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\xa0", "\u2003", "\u2028",
          "\u3000", "\u200b", "\x00"]  # every kind of whitespace, and some that are not


@given(st.one_of(st.text(st.sampled_from(["a", "é", *SPACES]), max_size=30), st.text()))
def test_a_memory_line_is_the_text_on_one_line_with_single_spaces(text: str) -> None:
    assert memory_line("episode", text, None) == " ".join(text.split()) + "\n"
    assert memory_line("fact", text, None) == "[undated] " + " ".join(text.split()) + "\n"
