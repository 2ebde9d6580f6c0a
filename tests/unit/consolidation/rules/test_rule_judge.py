"""The rule judge: pattern families in English and Chinese, and what it must ignore."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from streams.consolidation.rules.rule_judge import (
    IMPORTANCE,
    is_question,
    rule_judge,
    split_sentences,
)
from streams.memory.model import SourceMessage

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def msg(
    content: str, *, role: str = "user", new: bool = True, name: str | None = None, i: int = 1
) -> SourceMessage:
    return SourceMessage(f"e{i}", role, content, T0 + timedelta(minutes=i), name=name, new=new)


def judged(content: str, role: str = "user") -> list[tuple[str, str, str, float]]:
    cands = rule_judge([msg(content, role=role)])
    return [(c.content, c.type, c.scope, c.importance) for c in cands]


SAME = "<the sentence itself>"


REMEMBER, CORRECTION, PREFERENCE, FACT, LESSON, EVENT = (
    IMPORTANCE[k] for k in ("remember", "correction", "preference", "fact", "lesson", "event")
)


@pytest.mark.parametrize(
    ("text", "content", "type_", "importance"),
    [
        # first-person facts
        ("I'm Caroline.", SAME, "text", FACT),
        ("My name is Caroline.", SAME, "text", FACT),
        ("I live in Berlin.", SAME, "text", FACT),
        ("I work as a nurse.", SAME, "text", FACT),
        ("I work at Siemens.", SAME, "text", FACT),
        ("I'm a nurse.", SAME, "text", FACT),
        ("I am 32 years old.", SAME, "text", FACT),
        ("I'm allergic to peanuts.", SAME, "text", FACT),
        ("I have two kids.", SAME, "text", FACT),
        ("My wife's name is Anna.", SAME, "text", FACT),
        ("When I was young, I lived in Rome.", SAME, "text", FACT),
        ("我是小明。", SAME, "text", FACT),
        ("我叫小明", SAME, "text", FACT),
        ("我住在上海", SAME, "text", FACT),
        ("我在腾讯工作", SAME, "text", FACT),
        ("我今年30岁", SAME, "text", FACT),
        ("我有一只猫", SAME, "text", FACT),
        # preferences
        ("I like hiking.", SAME, "preference", PREFERENCE),
        ("I really love spicy food!", SAME, "preference", PREFERENCE),
        ("I don't like coffee.", SAME, "preference", PREFERENCE),
        ("I hate horror movies.", SAME, "preference", PREFERENCE),
        ("I prefer window seats.", SAME, "preference", PREFERENCE),
        ("My favourite colour is green.", SAME, "preference", PREFERENCE),
        ("I'm a big fan of jazz.", SAME, "preference", PREFERENCE),
        ("我喜欢爬山", SAME, "preference", PREFERENCE),
        ("我不喜欢香菜", SAME, "preference", PREFERENCE),
        ("我最喜欢的颜色是蓝色", SAME, "preference", PREFERENCE),
        # explicit requests to remember: the remembered content
        ("Please remember that my flat is number 12.", "my flat is number 12.", "text", REMEMBER),
        ("Remember: I hate mornings.", "I hate mornings.", "preference", REMEMBER),
        ("Don't forget that my flight is at 6.", "my flight is at 6.", "text", REMEMBER),
        ("Could you remember that I'm vegetarian?", "I'm vegetarian", "text", REMEMBER),
        ("Remember to call me Bob.", SAME, "text", REMEMBER),
        ("请记住我对花生过敏", "我对花生过敏", "text", REMEMBER),
        ("记住，我的生日是五月三日", "我的生日是五月三日", "text", REMEMBER),
        ("你能记住我喜欢喝茶吗？", "我喜欢喝茶", "preference", REMEMBER),
        # corrections
        ("Actually, I live in Munich now.", "I live in Munich now.", "text", CORRECTION),
        ("No, my name is Carol.", "my name is Carol.", "text", CORRECTION),
        ("Correction: the meeting is on Friday.", "the meeting is on Friday.", "text", CORRECTION),
        ("I meant Tuesday, not Monday.", SAME, "text", CORRECTION),
        ("Actually, I prefer tea.", "I prefer tea.", "preference", CORRECTION),
        ("其实我住在北京", "我住在北京", "text", CORRECTION),
        ("不对，我叫小红", "我叫小红", "text", CORRECTION),
        ("不是，会议是周五", "会议是周五", "text", CORRECTION),
        # changes said without "actually": corrections of the subject they name
        ("I moved to Lisbon.", SAME, "text", CORRECTION),
        ("I live in Munich now.", SAME, "text", CORRECTION),
        ("I no longer work at Siemens.", SAME, "text", CORRECTION),
        ("I joined Bosch last month.", SAME, "text", CORRECTION),
        ("I switched from Siemens to Bosch.", SAME, "text", CORRECTION),
        ("I'm not vegetarian anymore.", SAME, "text", CORRECTION),
        ("I don't have a dog anymore.", SAME, "text", CORRECTION),
        ("I got married last spring.", SAME, "text", CORRECTION),
        ("I don't like coffee anymore.", SAME, "preference", CORRECTION),
        ("I no longer enjoy jazz.", SAME, "preference", CORRECTION),
        ("我搬到上海了", SAME, "text", CORRECTION),
        ("我已经不在腾讯上班了", SAME, "text", CORRECTION),
        ("我不再喜欢咖啡了", SAME, "preference", CORRECTION),
        # subjects stated in a form the fact patterns do not know
        ("我吃素", SAME, "text", FACT),
        ("我单身", SAME, "text", FACT),
        ("我女朋友叫小红", SAME, "text", FACT),
        # standing instructions for the assistant's answers: preferences, kept whole
        ("Always include version numbers when I ask about software dependencies.", SAME,
         "preference", 0.9),
        ("From now on, answer in Spanish.", SAME, "preference", 0.9),
        ("以后我问日期的时候，请用年月日格式。", SAME, "preference", 0.9),
        # events
        ("Last week I went to a support group.", SAME, "text", EVENT),
        ("我昨天去了北京", SAME, "text", EVENT),
    ],
)
def test_user_patterns(text: str, content: str, type_: str, importance: float) -> None:
    expected = text if content == SAME else content
    assert judged(text) == [(expected, type_, "user", importance)]


@pytest.mark.parametrize(
    "text",
    [
        # questions are not facts
        "Do you remember my name?",
        "Where do I live?",
        "What's my name?",
        "Do you like jazz?",
        "Is my flight at 6",
        "你记得我住哪吗？",
        "你喜欢什么？",
        "我是不是说过我住在上海",
        # small talk
        "Hi!",
        "Thanks a lot.",
        "I'm fine, thanks.",
        "I'm sorry.",
        "I'm not sure.",
        "I'm a bit tired.",
        "I'm going to the store.",
        "I love it!",
        "I love you.",
        "I like that idea.",
        "I'd like to book a table.",
        "I have a question.",
        "I have no idea.",
        "I got it.",
        "My question is simple.",
        "No problem, I'll do it.",
        "Sorry, I'm late.",
        "Actually, that's great.",
        "Remember that?",
        "你好",
        "我爱你",
        "我有点累",
        "我是说你好",
        "I love it now.",
        "I'm a big fan.",
    ],
)
def test_questions_and_small_talk_yield_nothing(text: str) -> None:
    assert judged(text) == []


@pytest.mark.parametrize(
    ("text", "content", "type_"),
    [
        ("Lesson learned: the weather API needs ISO dates.", "the weather API needs ISO dates.",
         "tool"),
        ("Note to self: ask for the city first.", "ask for the city first.", "skill"),
        ("Next time I should ask for the city first.", "Next time I should ask for the city first.",
         "skill"),
        ("I've learned that the search tool needs quotes.", SAME, "tool"),
        ("经验：先问清楚城市", "先问清楚城市", "skill"),
        ("下次我应该先调用天气接口", SAME, "tool"),
    ],
)
def test_assistant_lessons_are_agent_memories(text: str, content: str, type_: str) -> None:
    expected = text if content == SAME else content
    assert judged(text, role="assistant") == [(expected, type_, "agent", LESSON)]


@pytest.mark.parametrize(
    ("role", "text"),
    [
        ("assistant", "I live in Berlin."),  # an assistant's "I" is not the user
        ("assistant", "I'm happy to help!"),
        ("assistant", "Shall I remember that next time?"),
        ("tool", "Lesson learned: nothing."),
        ("system", "My name is Memstream."),
    ],
)
def test_other_roles_yield_no_user_memories(role: str, text: str) -> None:
    assert judged(text, role=role) == []


def test_only_new_messages_are_judged() -> None:
    old = msg("I live in Paris.", new=False, i=1)
    new = msg("I live in Berlin.", i=2)
    assert [c.content for c in rule_judge([old, new])] == ["I live in Berlin."]


def test_speaker_name_sources_and_time() -> None:
    m = msg("Hi! I'm a painter. I love sunsets. How are you?", name="Caroline", i=7)
    cands = rule_judge([m])
    assert [c.content for c in cands] == ["Caroline: I'm a painter.", "Caroline: I love sunsets."]
    assert {c.source_event_ids for c in cands} == {("e7",)}
    assert {c.event_time for c in cands} == {T0 + timedelta(minutes=7)}


def test_events_are_episodes_and_facts_are_facts() -> None:
    kinds = [c.kind for c in rule_judge([msg("I went to Rome. I live in Oslo.")])]
    assert kinds == ["episode", "fact"]


def test_importance_order() -> None:
    assert REMEMBER > CORRECTION > PREFERENCE > FACT


def test_content_is_cut_to_max_chars() -> None:
    [cand] = rule_judge([msg("I live in " + "a very long place name " * 10)], max_chars=40)
    assert len(cand.content) <= 40 and cand.content.startswith("I live in")


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("Hi! I'm Caroline. I moved here 3.5 years ago.",
         ["Hi!", "I'm Caroline.", "I moved here 3.5 years ago."]),
        ("line one\nline two", ["line one", "line two"]),
        ("我叫小明。我住在上海！你呢？", ["我叫小明。", "我住在上海！", "你呢？"]),
        ("I love tea; I hate coffee", ["I love tea;", "I hate coffee"]),
        ("   ", []),
    ],
)
def test_split_sentences(text: str, sentences: list[str]) -> None:
    assert split_sentences(text) == sentences


@pytest.mark.parametrize(
    ("text", "question"),
    [
        ("Where do I live?", True),
        ("where do i live", True),
        ("Do you know my name", True),
        ("你住哪里？", True),
        ("你是医生吗", True),
        ("When I was young I lived in Rome.", False),
        ("I live in Rome.", False),
        ("我住在罗马。", False),
    ],
)
def test_is_question(text: str, question: bool) -> None:
    assert is_question(text) is question
