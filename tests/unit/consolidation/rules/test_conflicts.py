"""Conflicts with stored memories: rules, and the model path's prompt and parsing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from streams.consolidation.rules.conflicts import (
    ConflictOutputError,
    Slot,
    build_conflict_messages,
    decide_by_rules,
    own_copy,
    parse_conflict_output,
    stored_meanwhile,
    subject_slot,
)
from streams.consolidation.rules.dedup import similarity
from streams.memory.model import MemoryCandidate, StoredMemory

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def at(day: int | None) -> datetime | None:
    return None if day is None else T0 + timedelta(days=day)


def cand(content: str, day: int | None = 10) -> MemoryCandidate:
    return MemoryCandidate(content=content, event_time=at(day))


def stored(mem_id: str, content: str, day: int | None = 1) -> StoredMemory:
    return StoredMemory(id=mem_id, content=content, cube="user_profile", event_time=at(day))


@pytest.mark.parametrize(
    ("text", "slot"),
    [
        ("My name is Caroline.", Slot(None, "name", "caroline")),
        ("Caroline: I live in Berlin.", Slot("caroline", "residence", "berlin")),
        ("Actually, I now live in Munich", Slot(None, "residence", "munich")),
        ("I've moved to Paris", Slot(None, "residence", "paris")),
        ("I work at Siemens", Slot(None, "employer", "siemens")),
        ("I work as a nurse", Slot(None, "occupation", "nurse")),
        ("I'm 32 years old", Slot(None, "age", "32")),
        ("My favorite color is blue", Slot(None, "favourite:colour", "blue")),
        ("My favourite colour is red", Slot(None, "favourite:colour", "red")),
        ("My wife's name is Anna", Slot(None, "partner", "anna")),
        ("I like coffee", Slot(None, "likes:coffee", "+")),
        ("I don't like coffee anymore", Slot(None, "likes:coffee", "-")),
        ("I hate coffee", Slot(None, "likes:coffee", "-")),
        ("I'm not a fan of jazz", Slot(None, "likes:jazz", "-")),
        ("我叫小明", Slot(None, "name", "小明")),
        ("我住在上海", Slot(None, "residence", "上海")),
        ("我在腾讯工作", Slot(None, "employer", "腾讯")),
        ("我最喜欢的颜色是蓝色", Slot(None, "favourite:颜色", "蓝色")),
        ("我不喜欢咖啡", Slot(None, "likes:咖啡", "-")),
        ("我的生日是五月三日", Slot(None, "my:生日", "五月三日")),
        ("I went to the park", None),
        ("The weather API needs ISO dates", None),
    ],
)
def test_subject_slot(text: str, slot: Slot | None) -> None:
    assert subject_slot(text) == slot


@pytest.mark.parametrize(
    ("candidate", "existing", "action", "expire"),
    [
        pytest.param(cand("I live in Berlin."), [stored("m1", "i live in berlin")], "skip", [],
                     id="exact-duplicate"),
        pytest.param(cand("The weather API wants ISO dates"),
                     [stored("m1", "The weather API needs ISO dates")], "skip", [],
                     id="near-duplicate"),
        pytest.param(cand("I have a dog"), [stored("m1", "I have a dog named Rex")], "skip", [],
                     id="candidate-contained-in-stored"),
        pytest.param(cand("Actually I now live in Berlin"), [stored("m1", "I live in Berlin.")],
                     "skip", [], id="same-slot-same-value"),
        pytest.param(cand("I live in Munich."), [stored("m1", "I live in Berlin.")], "supersede",
                     ["m1"], id="newer-value"),
        pytest.param(cand("I moved to Munich.", day=None),
                     [stored("m1", "I live in Berlin.", None)], "supersede", ["m1"],
                     id="stored-without-time"),
        pytest.param(cand("I don't like coffee."), [stored("m1", "I like coffee")], "supersede",
                     ["m1"], id="polarity-flip"),
        pytest.param(cand("I love coffee"), [stored("m1", "I like coffee")], "skip", [],
                     id="same-polarity"),
        pytest.param(cand("我住在北京"), [stored("m1", "我住在上海")], "supersede", ["m1"],
                     id="chinese-newer-value"),
        pytest.param(cand("我不喜欢咖啡"), [stored("m1", "我喜欢咖啡")], "supersede", ["m1"],
                     id="chinese-polarity-flip"),
        pytest.param(cand("My favourite colour is red"),
                     [stored("m1", "My favorite color is blue")], "supersede", ["m1"],
                     id="favourite-changed"),
        pytest.param(cand("I live in Berlin with Anna"), [stored("m1", "I live in Berlin")],
                     "supersede", ["m1"], id="more-complete-same-slot"),
        pytest.param(cand("I have a dog named Rex and a cat"),
                     [stored("m1", "I have a dog named Rex")], "supersede", ["m1"],
                     id="more-complete-text"),
        pytest.param(cand("I live in Munich."),
                     [stored("m1", "I live in Berlin."), stored("m2", "I lived in Rome as a kid")],
                     "supersede", ["m1"], id="only-the-conflicting-one-expires"),
        pytest.param(cand("I like jazz."), [stored("m1", "I work at Siemens.")], "store", [],
                     id="unrelated"),
        pytest.param(cand("I like jazz."), [], "store", [], id="nothing-stored"),
        pytest.param(cand("I live in Paris.", day=1), [stored("m1", "I live in Berlin.", day=5)],
                     "skip", [], id="older-candidate"),
        pytest.param(cand("I live in Paris.", day=5), [stored("m1", "I live in Berlin.", day=5)],
                     "skip", [], id="same-time-is-not-newer"),
        pytest.param(cand("I live in Paris.", day=None), [stored("m1", "I live in Berlin.", day=5)],
                     "skip", [], id="candidate-without-time"),
        pytest.param(cand("I live in Paris.", day=7),
                     [stored("m1", "I live in Berlin.", day=5), stored("m2", "I live in Rome.", 9)],
                     "skip", [], id="one-newer-contradiction-blocks"),
        pytest.param(cand("Melanie: I live in Paris."),
                     [stored("m1", "Caroline: I live in Berlin.")], "store", [],
                     id="different-speakers"),
        pytest.param(cand("Melanie: I like tea"), [stored("m1", "Caroline: I like tea")],
                     "store", [], id="different-speakers-same-text"),
        pytest.param(cand("I live in Paris."), [stored("m1", "Caroline: I live in Berlin.")],
                     "store", [], id="named-and-unnamed-are-different-subjects"),
    ],
)
def test_decide_by_rules(
    candidate: MemoryCandidate, existing: list[StoredMemory], action: str, expire: list[str]
) -> None:
    decision = decide_by_rules(candidate, existing)
    assert (decision.action, decision.expire_ids) == (action, expire)
    assert decision.candidate is candidate and decision.reason


# the user's facts, each with the ways it may later be corrected or merely touched on
USER_FACTS = [stored("home", "I live in Porto."), stored("job", "I work as a nurse."),
              stored("employer", "I work at Siemens."), stored("diet", "I'm vegetarian."),
              stored("status", "I'm single."), stored("pet", "I have a dog named Rex."),
              stored("colour", "My favourite colour is blue."), stored("coffee", "I like coffee.")]
ZH_FACTS = [stored("home", "我住在北京。"), stored("job", "我是一名护士。"),
            stored("employer", "我在腾讯工作。"), stored("diet", "我吃素。"),
            stored("status", "我单身。"), stored("pet", "我养了一只狗。"),
            stored("colour", "我最喜欢的颜色是蓝色。"), stored("coffee", "我喜欢咖啡。")]


@pytest.mark.parametrize(
    ("said", "replaced"),
    [
        ("Actually I moved to Lisbon.", "home"),
        ("I relocated to Lisbon for work.", "home"),
        ("I don't live in Porto anymore.", "home"),
        ("I've moved from Porto to Lisbon.", "home"),
        ("I'm a teacher now.", "job"),
        ("I changed careers and now work as a chef.", "job"),
        ("I'm no longer a nurse.", "job"),
        ("Actually I work at Bosch now.", "employer"),
        ("I switched from Siemens to Bosch.", "employer"),
        ("I left Siemens and joined Bosch.", "employer"),
        ("I no longer work at Siemens.", "employer"),
        ("I'm vegan now.", "diet"),
        ("I'm not vegetarian anymore.", "diet"),
        ("I eat meat again.", "diet"),
        ("I got married last spring.", "status"),
        ("I'm in a relationship now.", "status"),
        ("I don't have a dog anymore.", "pet"),
        ("My dog passed away.", "pet"),
        ("Actually, my dog is called Max.", "pet"),
        ("My favourite colour is green now.", "colour"),
        ("I changed my mind, my favorite color is green.", "colour"),
        ("I don't like coffee anymore.", "coffee"),
        ("I switched from coffee to tea.", "coffee"),
        # statements that replace nothing
        ("I visited Lisbon last year.", None),
        ("My friend moved to Lisbon.", None),
        ("I used to live in Lisbon.", None),
        ("I still live in Porto.", None),
        ("My brother is a teacher.", None),
        ("My brother works at Bosch.", None),
        ("I work with Bosch as a client.", None),
        ("My wife is vegan.", None),
        ("I tried a vegan burger.", None),
        ("My sister got married.", None),
        ("My best friend is single.", None),
        ("I also have a cat.", None),
        ("I walked my dog today.", None),
        ("I also like tea.", None),
        ("My wife likes tea.", None),
        ("My son's favourite colour is green.", None),
    ],
)
def test_corrections_replace_their_fact_and_nothing_else(said: str, replaced: str | None) -> None:
    decision = decide_by_rules(cand(said), USER_FACTS)
    assert decision.expire_ids == ([replaced] if replaced else []), decision.reason
    assert decision.action in (("supersede",) if replaced else ("store", "skip"))


@pytest.mark.parametrize(
    ("said", "replaced"),
    [
        ("其实我住在上海。", "home"),
        ("我搬到上海了。", "home"),
        ("我已经不住在北京了，现在住在上海。", "home"),
        ("我从北京搬到了上海。", "home"),
        ("我现在是一名老师了。", "job"),
        ("我改行当律师了。", "job"),
        ("我不再当护士了，现在是医生。", "job"),
        ("我跳槽到阿里巴巴了。", "employer"),
        ("我已经不在腾讯上班了。", "employer"),
        ("我从腾讯跳槽到了华为。", "employer"),
        ("我现在吃纯素了。", "diet"),
        ("我不吃素了。", "diet"),
        ("我开始吃肉了。", "diet"),
        ("我结婚了。", "status"),
        ("我不再单身了。", "status"),
        ("我不养狗了。", "pet"),
        ("我的狗去世了。", "pet"),
        ("我现在最喜欢的颜色是绿色。", "colour"),
        ("我不再喜欢咖啡了。", "coffee"),
        ("我已经不喜欢咖啡了。", "coffee"),
        ("我去年去过上海。", None),
        ("我朋友搬到上海了。", None),
        ("我姐姐住在上海。", None),
        ("我哥哥是一名老师。", None),
        ("我哥哥在华为工作。", None),
        ("我以前在华为实习过。", None),
        ("我妻子吃纯素。", None),
        ("我姐姐结婚了。", None),
        ("我还养了一只猫。", None),
        ("我邻居养了一只狗。", None),
        ("我也喜欢茶。", None),
        ("我妻子最喜欢的颜色是绿色。", None),
    ],
)
def test_chinese_corrections_replace_their_fact_and_nothing_else(
    said: str, replaced: str | None
) -> None:
    decision = decide_by_rules(cand(said), ZH_FACTS)
    assert decision.expire_ids == ([replaced] if replaced else []), decision.reason
    assert decision.action in (("supersede",) if replaced else ("store", "skip"))


def test_a_restated_fact_is_skipped_not_replaced() -> None:
    for said in ("I still live in Porto.", "I live in Porto now."):
        assert decide_by_rules(cand(said), USER_FACTS).action == "skip", said
    assert decide_by_rules(cand("我现在还住在北京。"), ZH_FACTS).action == "skip"


def test_naive_and_aware_times_compare() -> None:
    naive = MemoryCandidate(content="I live in Munich.", event_time=datetime(2024, 6, 1))
    decision = decide_by_rules(naive, [stored("m1", "I live in Berlin.", day=1)])
    assert decision.action == "supersede"


def test_duplicate_threshold_is_configurable() -> None:
    c = cand("I enjoy long walks on the beach at sunset")
    s = stored("m1", "I enjoy short walks in the park at sunset")
    score = similarity(c.content, s.content)
    assert 0.4 < score < 0.8
    assert decide_by_rules(c, [s]).action == "store"
    assert decide_by_rules(c, [s], duplicate_threshold=score).action == "skip"


CANDS = [cand("I live in Munich."), cand("I like jazz."), cand("I don't like coffee.")]
EXISTING = [
    [stored("m-1", "I live in Berlin."), stored("m-2", "I live near a park.")],
    [],
    [stored("m-3", "I like coffee")],
]


def test_conflict_prompt_lists_candidates_with_their_stored_memories() -> None:
    system, user = build_conflict_messages("user_profile", CANDS, EXISTING)
    assert '"user_profile"' in system["content"] and "expire_ids" in system["content"]
    text = user["content"]
    assert "New memory 1 (time 2024-05-11 10:00): I live in Munich." in text
    assert "stored id=m-1 (time 2024-05-02 10:00): I live in Berlin." in text
    assert text.index("m-2") < text.index("New memory 2") < text.index("(no stored memories")
    assert text.index("New memory 3") < text.index("m-3")


def test_conflict_prompt_needs_one_list_per_candidate() -> None:
    with pytest.raises(ValueError):
        build_conflict_messages("user_profile", CANDS, EXISTING[:2])


def answer(*items: dict[str, object]) -> str:
    return json.dumps(list(items))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            answer({"index": 1, "action": "supersede", "expire_ids": ["m-1"]},
                   {"index": 2, "action": "store"},
                   {"index": 3, "action": "supersede", "expire_ids": ["m-3"]}),
            [("supersede", ["m-1"]), ("store", []), ("supersede", ["m-3"])], id="plain"),
        pytest.param(
            "```json\n" + answer({"index": 3, "action": "skip"}, {"index": 1, "action": "store"},
                                 {"index": 2, "action": "skip"}) + "\n```",
            [("store", []), ("skip", []), ("skip", [])], id="fenced-out-of-order"),
        pytest.param(
            answer({"index": 1, "action": "supersede", "expire_ids": ["m-3", "m-9"]},
                   {"index": 2, "action": "store"}, {"index": 3, "action": "skip"}),
            [("store", []), ("store", []), ("skip", [])], id="ids-not-shown-are-dropped"),
        pytest.param(
            answer({"index": 1, "action": "supersede", "expire_ids": ["m-2", "m-1", "m-2"]},
                   {"index": 2, "action": "STORE"}, {"index": 3, "action": "skip",
                                                     "expire_ids": ["m-3"]}),
            [("supersede", ["m-2", "m-1"]), ("store", []), ("skip", [])],
            id="dedup-ids-and-skip-expires-nothing"),
        pytest.param(
            answer({"action": "replace", "expire": "m-1"}, {"action": "add"},
                   {"action": "duplicate"}),
            [("supersede", ["m-1"]), ("store", []), ("skip", [])], id="positional-and-aliases"),
        pytest.param(
            json.dumps({"decisions": [{"index": "2", "action": "skip"}]}),
            [("supersede", ["m-1"]), ("skip", []), ("supersede", ["m-3"])],
            id="wrapped-missing-fall-back-to-rules"),
        pytest.param(
            answer({"index": 1, "action": "merge"}, {"index": 2, "action": "store"},
                   {"index": 3, "action": "store"}),
            [("supersede", ["m-1"]), ("store", []), ("store", [])], id="unknown-action-uses-rules"),
        pytest.param(
            '[{"index": 1, "action": "skip"}, {"index": 2, "action": "skip"}, {"index": 3, "act',
            [("skip", []), ("skip", []), ("supersede", ["m-3"])], id="truncated"),
        pytest.param("[]", [("supersede", ["m-1"]), ("store", []), ("supersede", ["m-3"])],
                     id="empty-array-uses-rules"),
        pytest.param(  # a digit int() cannot read is no index: taken by position, no crash
            json.dumps({"decisions": [{"index": "²", "action": "skip"}]}),
            [("skip", []), ("store", []), ("supersede", ["m-3"])],
            id="non-ascii-digit-index"),
    ],
)
def test_parse_conflict_output(text: str, expected: list[tuple[str, list[str]]]) -> None:
    decisions = parse_conflict_output(text, CANDS, EXISTING)
    assert [(d.action, d.expire_ids) for d in decisions] == expected
    assert [d.candidate for d in decisions] == CANDS


def test_reasons_say_who_decided() -> None:
    text = answer({"index": 1, "action": "skip", "reason": "same\nplace"})
    first, second, _ = parse_conflict_output(text, CANDS, EXISTING)
    assert first.reason == "model: same place"
    assert second.reason.startswith("rules: ")


@pytest.mark.parametrize("text", ["", "no decisions today", "[1, 2]", '{"x": 1}'])
def test_unparseable_conflict_output_raises(text: str) -> None:
    with pytest.raises(ConflictOutputError):
        parse_conflict_output(text, CANDS, EXISTING)


def sourced(mem_id: str, content: str, *sources: str) -> StoredMemory:
    return StoredMemory(id=mem_id, content=content, cube="user_profile",
                        source_event_ids=sources)


MINE = MemoryCandidate(content="I live in Berlin.", source_event_ids=("c1-1",))


@pytest.mark.parametrize(
    ("found", "write_started", "skip_for"),
    [
        ([], False, []),
        # another run's memory saying the same (other messages): skip
        ([sourced("m1", "I live in Berlin.", "c2-1")], False, ["m1"]),
        ([sourced("m1", "i live in berlin", "c2-1")], False, ["m1"]),
        ([sourced("m1", "I live in Berlin now.", "c2-1")], False, ["m1"]),  # same slot, value
        ([sourced("m1", "I actually live in Berlin.", "c2-1")], False, ["m1"]),
        # the run's own copy (same text, same messages) is no reason to skip
        ([sourced("m1", "I live in Berlin.", "c1-1")], False, []),
        ([sourced("m1", "I live in Berlin.", "c1-1")], True, []),
        # no sources returned: the own copy only if this run had started writing it
        ([sourced("m1", "I live in Berlin.")], True, []),
        ([sourced("m1", "I live in Berlin.")], False, ["m1"]),
        # own copy and another run's: skip for the other one
        ([sourced("m1", "I live in Berlin.", "c1-1"), sourced("m2", "I live in Berlin.", "c2-4")],
         False, ["m2"]),
        # a different value or an unrelated memory: not the same
        ([sourced("m1", "I live in Paris.", "c2-1")], False, []),
        ([sourced("m1", "I love hiking.", "c2-1")], False, []),
    ],
)
def test_a_decision_of_an_earlier_hold_is_skipped_when_the_same_was_stored_meanwhile(
    found: list[StoredMemory], write_started: bool, skip_for: list[str]
) -> None:
    assert stored_meanwhile(MINE, found, write_started=write_started) == skip_for


def test_own_copy_needs_the_same_text() -> None:
    assert own_copy(MINE, sourced("m1", "I live in Berlin!", "c1-1"), write_started=False)
    assert not own_copy(MINE, sourced("m1", "I live in Bern.", "c1-1"), write_started=True)
    assert not own_copy(MINE, sourced("m1", "I live in Berlin.", "c1-1", "c1-2"),
                        write_started=True)


PROJECT_FACTS = [
    stored("goal", "My goal is to improve expense classification and make it easier to track "
                   "spending habits."),
    stored("deadline", "My deadline is April 1."),
    stored("title", "My job title is junior data analyst in the finance team."),
]


@pytest.mark.parametrize(
    ("said", "replaced"),
    [
        # another aim is held beside the first, unless it says the first changed
        ("My goal is to further improve the maintainability score.", None),
        ("My goal is now to further improve the maintainability score.", "goal"),
        # a slot's new value replaces the old
        ("My deadline is April 5.", "deadline"),
        ("My deadline is now April 5.", "deadline"),
        ("My job title is senior data engineer in the platform team.", "title"),
    ],
)
def test_a_different_aim_is_no_update_and_a_new_value_is(said: str, replaced: str | None) -> None:
    decision = decide_by_rules(cand(said), PROJECT_FACTS)
    assert decision.expire_ids == ([replaced] if replaced else []), decision.reason
