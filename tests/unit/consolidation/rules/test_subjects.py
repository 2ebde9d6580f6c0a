"""Subject claims: what a statement says of its speaker, in English and Chinese, and
the ways people say that it changed."""

from __future__ import annotations

import pytest

from streams.consolidation.rules.subjects import (
    Claim,
    claims,
    is_change,
    relation,
    subject_keys,
)


def c(key: str, value: str, negated: bool = False, speaker: str | None = None) -> Claim:
    return Claim(speaker, key, value, negated)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # home
        ("I live in Porto.", [c("residence", "porto")]),
        ("I'm based in Porto.", [c("residence", "porto")]),
        ("Actually I moved to Lisbon.", [c("residence", "lisbon")]),
        ("We relocated to Lisbon last month.", [c("residence", "lisbon")]),
        ("I don't live in Porto anymore.", [c("residence", "porto", True)]),
        ("I no longer live in Porto, I live in Lisbon now.",
         [c("residence", "porto", True), c("residence", "lisbon")]),
        ("I've moved from Porto to Lisbon.",
         [c("residence", "lisbon"), c("residence", "porto", True)]),
        ("I changed my address, I now live in Lisbon.", [c("residence", "lisbon")]),
        ("我住在北京。", [c("residence", "北京")]),
        ("我搬到上海了。", [c("residence", "上海")]),
        ("我上个月搬去上海了。", [c("residence", "上海")]),
        ("我已经不住在北京了，现在住在上海。",
         [c("residence", "北京", True), c("residence", "上海")]),
        ("我从北京搬到了上海。", [c("residence", "上海"), c("residence", "北京", True)]),
        # job and employer
        ("I work as a nurse.", [c("occupation", "nurse")]),
        ("I'm a teacher now.", [c("occupation", "teacher")]),
        ("I changed careers and now work as an engineer.", [c("occupation", "engineer")]),
        ("I'm not a nurse anymore.", [c("occupation", "nurse", True)]),
        ("I work at Siemens.", [c("employer", "siemens")]),
        ("I no longer work for Siemens.", [c("employer", "siemens", True)]),
        ("I joined Bosch last month.", [c("employer", "bosch")]),
        ("I switched from Siemens to Bosch.", [c("", "siemens", True)]),
        ("我是一名护士。", [c("occupation", "护士")]),
        ("我改行当律师了。", [c("occupation", "律师")]),
        ("我在腾讯工作。", [c("employer", "腾讯")]),
        ("我跳槽到阿里巴巴了。", [c("employer", "阿里巴巴")]),
        ("我从腾讯跳槽到了华为。", [c("employer", "华为"), c("employer", "腾讯", True)]),
        # diet, relationship, pets
        ("I'm vegetarian.", [c("diet", "vegetarian")]),
        ("I'm not vegetarian anymore.", [c("diet", "vegetarian", True)]),
        ("I switched to a vegan diet.", [c("diet", "vegan")]),
        ("I eat meat again.", [c("diet", "omnivore")]),
        ("我吃素。", [c("diet", "vegetarian")]),
        ("我不吃素了。", [c("diet", "vegetarian", True)]),
        ("I'm single.", [c("status", "single")]),
        ("I got married last spring.", [c("status", "married")]),
        ("Anna and I broke up.", [c("status", "single"), c("partner", "anna", True)]),
        ("My girlfriend is Maria now.", [c("partner", "maria")]),
        ("我和小红分手了。", [c("status", "single"), c("partner", "小红", True)]),
        ("I have a dog named Rex.", [c("pet:dog", "+"), c("pet name:dog", "rex")]),
        ("I no longer have a dog.", [c("pet:dog", "-")]),
        ("My dog passed away last month.", [c("pet:dog", "-")]),
        ("我养了一只狗。", [c("pet:dog", "+")]),
        ("我的猫去世了。", [c("pet:cat", "-")]),
        # preferences
        ("My favorite color is blue.", [c("favourite:colour", "blue")]),
        ("I don't like coffee anymore.", [c("likes:coffee", "-")]),
        ("我不再喜欢咖啡了。", [c("likes:咖啡", "-")]),
        # speakers
        ("Caroline: I live in Berlin.", [c("residence", "berlin", speaker="caroline")]),
        # about someone else, or nothing
        ("My friend moved to Berlin.", []),
        ("My wife is vegan.", [c("my:wife", "vegan")]),
        ("I visited Lisbon last year.", []),
        ("I used to live in Lisbon.", []),
        ("I'm a big fan.", []),
        ("我朋友搬到上海了。", []),
        ("我哥哥在华为工作。", []),
    ],
)
def test_claims(text: str, expected: list[Claim]) -> None:
    assert list(claims(text)) == expected


@pytest.mark.parametrize(
    ("new", "old", "expected"),
    [
        ("I moved to Lisbon.", "I live in Porto.", "conflict"),
        ("I don't live in Porto anymore.", "I live in Porto.", "conflict"),
        ("I don't live in Porto anymore.", "I live in Lisbon.", None),
        ("I still live in Porto.", "I live in Porto.", "duplicate"),
        ("I live in Porto with Anna.", "I live in Porto.", "subsumes"),
        ("I switched from coffee to tea.", "I like coffee.", "conflict"),
        ("I switched from Siemens to Bosch.", "I work at Siemens.", "conflict"),
        ("I also have a cat.", "I have a dog named Rex.", None),
        ("Actually, my dog is called Max.", "I have a dog named Rex.", "conflict"),
        ("I'm a teacher now.", "I work at Siemens.", None),
        ("Melanie: I live in Paris.", "Caroline: I live in Berlin.", None),
        ("我搬到上海了。", "我住在北京。", "conflict"),
        ("我还养了一只猫。", "我养了一只狗。", None),
        ("我不再喜欢咖啡了。", "我喜欢咖啡。", "conflict"),
    ],
)
def test_relation(new: str, old: str, expected: str | None) -> None:
    assert relation(claims(new), claims(old)) == expected


@pytest.mark.parametrize(
    ("text", "changed"),
    [
        ("Actually, I live in Lisbon.", True),
        ("I live in Lisbon now.", True),
        ("I moved to Lisbon.", True),
        ("I no longer work at Siemens.", True),
        ("I changed jobs.", True),
        ("I switched to a vegan diet.", True),
        ("I'm not vegetarian anymore.", True),
        ("其实我住在北京。", True),
        ("我现在住在上海了。", True),
        ("我不再喜欢咖啡了。", True),
        ("我跳槽到华为了。", True),
        ("I live in Lisbon.", False),
        ("我住在北京。", False),
    ],
)
def test_is_change(text: str, changed: bool) -> None:
    assert is_change(text) is changed


def test_subject_keys_are_index_terms_of_the_speaker() -> None:
    assert subject_keys("I moved to Lisbon.") == ("§residence",)
    assert subject_keys("Caroline: I work at Siemens.") == ("§employer@caroline",)
    assert subject_keys("I've moved from Porto to Lisbon.") == ("§residence",)
    assert subject_keys("I switched from tea to coffee.") == ()  # a value left, no subject
    assert subject_keys("I went to the park.") == ()
    long_key = subject_keys("My favourite " + "very " * 12 + "old bike is the red one.")
    assert len(long_key) == 1 and len(long_key[0]) <= 64
