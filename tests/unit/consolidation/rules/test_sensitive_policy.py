"""The sensitive-content policy: keep, mask or drop per kind, applied to a text."""

from __future__ import annotations

import pytest

from streams.consolidation.rules.sensitive.kinds import Finding, Kind, resolved
from streams.consolidation.rules.sensitive.policy import (
    DEFAULT_POLICY,
    Action,
    Policy,
    screen,
)
from streams.testing.consolidation import ListedDetector

K, M, D = Action.KEEP, Action.MASK, Action.DROP
TEXT = "Ana: ana@x.io, card 4111111111111111, pw hunter2"
NAME = Finding(0, 3, Kind.NAME)
EMAIL = Finding(5, 13, Kind.EMAIL)
CARD = Finding(20, 36, Kind.CARD)
SECRET = Finding(41, 48, Kind.SECRET)


@pytest.mark.parametrize(("findings", "overrides", "text", "done"), [
    ([], {}, TEXT, {}),
    ([NAME], {}, TEXT, {Kind.NAME: K}),
    ([EMAIL], {}, "Ana: [EMAIL], card 4111111111111111, pw hunter2", {Kind.EMAIL: M}),
    ([NAME, EMAIL, CARD], {}, "Ana: [EMAIL], card [CARD], pw hunter2",
     {Kind.NAME: K, Kind.EMAIL: M, Kind.CARD: M}),
    ([NAME, EMAIL], {"name": "mask"}, "[NAME]: [EMAIL], card 4111111111111111, pw hunter2",
     {Kind.NAME: M, Kind.EMAIL: M}),
    ([EMAIL, CARD], {"email": "keep"}, "Ana: ana@x.io, card [CARD], pw hunter2",
     {Kind.EMAIL: K, Kind.CARD: M}),
    ([EMAIL, SECRET], {}, None, {Kind.EMAIL: D, Kind.SECRET: D}),
    ([SECRET], {"secret": "mask"}, "Ana: ana@x.io, card 4111111111111111, pw [SECRET]",
     {Kind.SECRET: M}),
    ([CARD], {"card": "drop"}, None, {Kind.CARD: D}),
    ([EMAIL, EMAIL], {}, "Ana: [EMAIL], card 4111111111111111, pw hunter2", {Kind.EMAIL: M}),
])
def test_screen_applies_the_action_of_each_kind_found(
        findings: list[Finding], overrides: dict[str, str], text: str | None,
        done: dict[Kind, Action]) -> None:
    result = screen(TEXT, findings, Policy.of(overrides))
    assert (result.text, dict(result.done)) == (text, done)
    assert result.dropped is (text is None)
    assert result.masked == ({k for k, a in done.items() if a is M} if text else set())


def test_a_kept_name_never_shields_an_overlapping_masked_email() -> None:
    text = "mail john.smith@x.io now"
    found = [Finding(5, 15, Kind.NAME), Finding(5, 20, Kind.EMAIL)]
    assert screen(text, found).text == "mail [EMAIL] now"
    longer_name = [Finding(0, 20, Kind.NAME), Finding(5, 20, Kind.EMAIL)]
    assert screen(text, longer_name).text == "mail [EMAIL] now"


@pytest.mark.parametrize(("findings", "kept"), [
    ([Finding(0, 19, Kind.CARD), Finding(5, 15, Kind.PHONE)], [Finding(0, 19, Kind.CARD)]),
    ([Finding(5, 15, Kind.PHONE), Finding(0, 4, Kind.EMAIL)],
     [Finding(0, 4, Kind.EMAIL), Finding(5, 15, Kind.PHONE)]),
    ([Finding(0, 30, Kind.NAME), Finding(10, 15, Kind.SECRET)], [Finding(10, 15, Kind.SECRET)]),
    ([Finding(0, 5, Kind.PHONE), Finding(0, 5, Kind.IP)], [Finding(0, 5, Kind.IP)]),
])
def test_resolved_keeps_validated_and_longer_findings(
        findings: list[Finding], kept: list[Finding]) -> None:
    assert resolved(findings) == kept


@pytest.mark.parametrize(("kind", "action"), [
    (Kind.SECRET, D), (Kind.CARD, M), (Kind.IBAN, M), (Kind.NATIONAL_ID, M), (Kind.EMAIL, M),
    (Kind.PHONE, M), (Kind.IP, M), (Kind.NAME, K), (Kind.LOCATION, K),
])
def test_the_default_policy(kind: Kind, action: Action) -> None:
    assert DEFAULT_POLICY.action(kind) is action


def test_acted_on_names_the_kinds_worth_detecting() -> None:
    assert Kind.NAME not in DEFAULT_POLICY.acted_on()
    assert Kind.NAME in Policy.of({"name": "mask"}).acted_on()


@pytest.mark.parametrize("overrides", [{"cards": "mask"}, {"card": "hide"}])
def test_an_unknown_kind_or_action_is_refused(overrides: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="unknown kind or action"):
        Policy.of(overrides)


@pytest.mark.parametrize(("start", "end"), [(3, 3), (5, 2), (-1, 4)])
def test_a_finding_has_a_span(start: int, end: int) -> None:
    with pytest.raises(ValueError):
        Finding(start, end, Kind.EMAIL)


def test_the_listed_detector_double_finds_every_occurrence() -> None:
    detector = ListedDetector({"a@x.io": Kind.EMAIL, "hunter2": Kind.SECRET})
    text = "a@x.io, a@x.io and hunter2"
    assert detector.detect(text) == [Finding(0, 6, Kind.EMAIL), Finding(8, 14, Kind.EMAIL),
                                     Finding(19, 26, Kind.SECRET)]
    assert screen(text, detector.detect(text), Policy.of({"secret": "mask"})).text == (
        "[EMAIL], [EMAIL] and [SECRET]")
    assert detector.seen == [text, text]
