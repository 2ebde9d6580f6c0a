"""Screening of candidates and summaries: the policy a tenant's agent gets, what
is done per kind, and that a policy acting on nothing findable detects nothing."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from streams.consolidation.model import PlannedCandidate
from streams.consolidation.rules.sensitive.kinds import Finding, Kind
from streams.consolidation.rules.sensitive.policy import DEFAULT_ACTIONS, Action
from streams.consolidation.screening import SUMMARY_WITHHELD, Screening, never_dropping
from streams.memory.model import USER_CUBE, MemoryCandidate
from streams.settings import SensitiveSettings
from streams.testing.consolidation import ListedDetector

DEPLOYMENT = {k.value: a.value for k, a in DEFAULT_ACTIONS.items()}
LISTED = {"a@b.io": Kind.EMAIL, "sk-123": Kind.SECRET, "Ann": Kind.NAME}


def planned(text: str) -> PlannedCandidate:
    return PlannedCandidate(USER_CUBE, MemoryCandidate(
        content=text, event_time=datetime(2026, 1, 1, tzinfo=UTC)))


def test_the_settings_name_every_kind_with_the_default_actions() -> None:
    assert SensitiveSettings().actions() == DEPLOYMENT


@pytest.mark.parametrize(("settings", "loads"), [
    ({}, False), ({"name": "mask"}, True), ({"location": "drop"}, True),
    ({"ner": "on"}, True), ({"name": "mask", "ner": "off"}, False),
    ({"tenants": {"acme": {"name": "mask"}}}, True),
    ({"tenants": {"acme": {"email": "drop"}, "globex": {"location": "drop"}}}, True),
    ({"tenants": {"acme": {"email": "drop", "name": "keep"}}}, False),
    ({"tenants": {"acme": {"name": "mask"}}, "ner": "off"}, False),
])
def test_the_ner_model_loads_only_when_asked(settings: dict[str, str], loads: bool) -> None:
    assert SensitiveSettings.model_validate(settings).finds_names() is loads


@pytest.mark.parametrize(("overrides", "kind", "action"), [
    ((), Kind.EMAIL, Action.MASK),
    ((("email", "drop"),), Kind.EMAIL, Action.DROP),
    ((("email", "drop"),), Kind.SECRET, Action.DROP),
    ((("secret", "keep"),), Kind.SECRET, Action.KEEP),
    ((("email", "shred"),), Kind.EMAIL, Action.MASK),  # unreadable: the deployment's
    ((("ssn", "drop"),), Kind.NATIONAL_ID, Action.MASK),
])
def test_an_agents_policy_is_the_deployments_with_its_overrides(
        overrides: tuple[tuple[str, str], ...], kind: Kind, action: Action) -> None:
    screening = Screening(ListedDetector({}), DEPLOYMENT)
    assert screening.policy("t", "a", overrides).action(kind) is action


@pytest.mark.parametrize(("tenant", "overrides", "relax", "kind", "action"), [
    # the tenant's own actions over the deployment's; another tenant keeps the deployment's
    ("acme", (), True, Kind.EMAIL, Action.DROP),
    ("acme", (), True, Kind.NAME, Action.MASK),
    ("other", (), True, Kind.EMAIL, Action.MASK),
    # an agent's configuration over its tenant's
    ("acme", (("email", "keep"),), True, Kind.EMAIL, Action.KEEP),
    ("acme", (("email", "keep"),), False, Kind.EMAIL, Action.DROP),  # may only tighten
    ("acme", (("name", "drop"),), False, Kind.NAME, Action.DROP),
    ("other", (("card", "keep"), ("email", "drop")), False, Kind.CARD, Action.MASK),
    ("other", (("card", "keep"), ("email", "drop")), False, Kind.EMAIL, Action.DROP),
    # one bad entry does not void the others
    ("other", (("email", "shred"), ("phone", "drop")), True, Kind.PHONE, Action.DROP),
    ("other", (("emial", "drop"), ("phone", "drop")), True, Kind.EMAIL, Action.MASK),
])
def test_policies_are_layered_deployment_tenant_agent(
        tenant: str, overrides: tuple[tuple[str, str], ...], relax: bool, kind: Kind,
        action: Action) -> None:
    screening = Screening(ListedDetector({}), DEPLOYMENT,
                          tenants={"acme": {"email": "drop", "name": "mask"}},
                          agents_may_relax=relax)
    assert screening.policy(tenant, "a", overrides).action(kind) is action


def test_an_unknown_kind_or_action_of_a_tenant_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="acme"):
        Screening(ListedDetector({}), DEPLOYMENT, tenants={"acme": {"email": "shred"}})
    with pytest.raises(ValueError, match="unknown kind"):
        SensitiveSettings.model_validate({"tenants": {"acme": {"emial": "drop"}}})
    assert SensitiveSettings.model_validate(
        {"tenants": {"acme": {"email": "drop"}}}).tenants == {"acme": {"email": "drop"}}


def test_entries_not_applied_are_named_in_a_warning_without_any_text(
        caplog: pytest.LogCaptureFixture) -> None:
    screening = Screening(ListedDetector({}), DEPLOYMENT, agents_may_relax=False)
    screening.policy("t", "a", (("secret", "keep"), ("x" * 500, "drop")))
    [record] = [r for r in caplog.records if "not applied" in r.getMessage()]
    assert "secret -> keep" in record.getMessage() and len(record.getMessage()) < 300


def test_entries_not_applied_cannot_forge_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    screening = Screening(ListedDetector({}), DEPLOYMENT)
    forged = "x\nCRITICAL forged line\r\x1b[2J\u2028\u202e"
    screening.policy("t", "a", ((forged, "drop"), ("email", forged)))
    [record] = [r for r in caplog.records if "not applied" in r.getMessage()]
    message = record.getMessage()
    assert message.isprintable()
    assert "\\nCRITICAL forged" in message


def test_only_the_first_entries_not_applied_are_named(caplog: pytest.LogCaptureFixture) -> None:
    screening = Screening(ListedDetector({}), DEPLOYMENT)
    screening.policy("t", "a", tuple((f"kind{i}", "drop") for i in range(30)))
    [record] = [r for r in caplog.records if "not applied" in r.getMessage()]
    message = record.getMessage()
    assert "kind7 -> drop" in message and "kind8 -> drop" not in message
    assert message.endswith(", and 22 more")


def test_a_summary_policy_masks_what_drops() -> None:
    policy = never_dropping(Screening(ListedDetector({}), DEPLOYMENT).deployment)
    assert policy.action(Kind.SECRET) is Action.MASK
    assert policy.action(Kind.NAME) is Action.KEEP


@pytest.mark.parametrize(("text", "stored", "masked"), [
    ("write to a@b.io", "write to [EMAIL]", ("email",)),
    ("key sk-123 and a@b.io", None, ()),
    ("Ann says hi", "Ann says hi", ()),
    ("nothing here", "nothing here", ()),
])
async def test_candidates_are_kept_masked_or_dropped(text: str, stored: str | None,
                                                    masked: tuple[str, ...]) -> None:
    screening = Screening(ListedDetector(LISTED), DEPLOYMENT)
    out = await screening.candidates("t", [planned(text)], screening.deployment)
    assert [(p.candidate.content, p.candidate.masked) for p in out] == (
        [] if stored is None else [(stored, masked)])


async def test_names_are_not_looked_for_when_the_detector_cannot_find_them() -> None:
    detector = ListedDetector(LISTED, finds_names=False)
    screening = Screening(detector, {**DEPLOYMENT, "email": "keep", "secret": "keep",
                                     "card": "keep", "iban": "keep", "national_id": "keep",
                                     "phone": "keep", "ip": "keep", "name": "mask"})
    out = await screening.candidates("t", [planned("Ann")], screening.deployment)
    assert [p.candidate.content for p in out] == ["Ann"] and detector.seen == []


async def test_a_summary_is_masked() -> None:
    screening = Screening(ListedDetector(LISTED), DEPLOYMENT)
    text = await screening.summary("t", "key sk-123, mail a@b.io", screening.deployment)
    assert text == "key [SECRET], mail [EMAIL]"


async def test_a_stored_text_is_kept_out_when_the_policy_would_change_it() -> None:
    screening = Screening(ListedDetector(LISTED), DEPLOYMENT)
    policy = screening.policy("t", "a", (("name", "mask"),))
    texts = ["write to a@b.io", "key sk-123", "Ann says hi", "write to [EMAIL]", "nothing"]
    assert await screening.kept_out(texts, policy) == [True, True, True, False, False]
    keep_all = screening.policy("t", "a", tuple((k.value, "keep") for k in Kind))
    assert await screening.kept_out(texts, keep_all) == [False] * 5
    assert await screening.kept_out([], policy) == []


class StatedDetector:
    """Finds a password only where it is stated as one ("password is X"), as the real
    detector does: a model's wording of it ("login is X") is not found by itself."""

    finds_names = False

    async def detect_all(self, texts: list[str]) -> list[list[Finding]]:
        return [[Finding(m.start(1), m.end(1), Kind.SECRET)
                 for m in re.finditer(r"password is (\S+)", t)] for t in texts]


def episode(text: str) -> PlannedCandidate:
    p = planned(text)
    return replace(p, candidate=replace(p.candidate, kind="episode"))


@pytest.mark.parametrize(("secret", "fact"), [
    ("drop", None), ("mask", "The user's wiki login is [SECRET]."),
    ("keep", "The user's wiki login is Tr0ub4dor&3x."),
])
async def test_a_value_a_model_words_again_is_screened_as_where_it_was_said(
        secret: str, fact: str | None) -> None:
    screening = Screening(StatedDetector(), {**DEPLOYMENT, "secret": secret})
    said = "User: my password is Tr0ub4dor&3x"
    worded = "The user's wiki login is Tr0ub4dor&3x."
    kept = await screening.candidates("t", [episode(said), planned(worded)],
                                      screening.deployment)
    facts = [p.candidate.content for p in kept if p.candidate.kind == "fact"]
    assert facts == ([fact] if fact else [])
    # no episode stands for the messages (a provider keeping none): the messages are read
    kept = await screening.candidates("t", [planned(worded)], screening.deployment,
                                      said=[said])
    assert [p.candidate.content for p in kept] == ([fact] if fact else [])


async def test_a_summary_masks_what_a_model_repeats_of_the_messages() -> None:
    screening = Screening(StatedDetector(), DEPLOYMENT)
    text = await screening.summary("t", "- wiki login: Tr0ub4dor&3x", screening.deployment,
                                   ["my password is Tr0ub4dor&3x"])
    assert text == "- wiki login: [SECRET]"


async def test_too_many_values_keep_no_worded_fact() -> None:
    screening = Screening(StatedDetector(), {**DEPLOYMENT, "secret": "mask"})
    said = " ".join(f"password is pw-{i:04d}-x" for i in range(65))
    kept = await screening.candidates("t", [episode(said), planned("An innocent fact.")],
                                      screening.deployment)
    assert [p.candidate.kind for p in kept] == ["episode"]
    assert await screening.summary("t", "sum", screening.deployment, [said]) == \
        SUMMARY_WITHHELD


async def test_a_fact_said_inside_an_episode_is_read_there_not_again() -> None:
    detector = ListedDetector(LISTED)
    screening = Screening(detector, DEPLOYMENT)
    kept = await screening.candidates("t", [
        episode("User: I live in Berlin. Write to a@b.io please."),
        planned("Write to a@b.io please."), planned("I live in Berlin."),
        planned("Ann moved away.")], screening.deployment)
    assert detector.seen == ["User: I live in Berlin. Write to a@b.io please.",
                             "Ann moved away."]
    assert [p.candidate.content for p in kept] == [
        "User: I live in Berlin. Write to [EMAIL] please.", "Write to [EMAIL] please.",
        "I live in Berlin.", "Ann moved away."]
    assert kept[1].candidate.masked == ("email",)
