"""Consolidation screens what it stores for sensitive content (the shipped
``ListedDetector`` stands in for the scanner): per kind keep, mask or drop, the
agent's override on the agent-config topic, summaries, provenance and counts;
nothing the policy keeps out reaches a candidate row or the provider."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from streams.adapters.db.schema import consolidation as cs
from streams.adapters.db.schema.conversation import conversation_summary
from streams.consolidation.rules.sensitive.kinds import Kind
from streams.testing.consolidation import ListedDetector
from tests.agents.consolidation_harness import Harness

EMAIL, CARD, PASSWORD, NAME = "ann@example.com", "4111 1111 1111 1111", "hunter2xyz", "Ann Lee"
LISTED = {EMAIL: Kind.EMAIL, CARD: Kind.CARD, PASSWORD: Kind.SECRET, NAME: Kind.NAME}
SAID = [("user", f"My email is {EMAIL} and I love hiking."),
        ("user", f"My password is {PASSWORD} for the wiki."),
        ("user", f"My friend {NAME} lives in Berlin."),
        ("assistant", "Noted, thanks.")]
RAW = (EMAIL, CARD, PASSWORD)


def seen(tenant: str, kind: str, action: str) -> float:
    return REGISTRY.get_sample_value("memstream_sensitive_memories_total",
                                     {"tenant": tenant, "kind": kind, "action": action}) or 0.0


def harness(engine: AsyncEngine, **kw: object) -> tuple[Harness, ListedDetector]:
    detector = ListedDetector(LISTED)
    return Harness(engine, sensitive=detector, **kw), detector  # type: ignore[arg-type]


async def candidate_rows(h: Harness) -> list[tuple[str, str | None]]:
    async with h.engine.connect() as conn:
        rows = (await conn.execute(select(cs.consolidation_candidate))).all()
    return [(r.content, r.masked) for r in rows]


async def test_the_default_policy_masks_contact_drops_secrets_and_keeps_names(
        engine: AsyncEngine) -> None:
    h, detector = harness(engine)
    before = (seen("other", "email", "mask"), seen("other", "secret", "drop"),
              seen("other", "name", "keep"))
    await h.say("c1", SAID)
    assert (await h.pipeline.run(h.closed("c1"))).outcome == "done"
    stored = h.provider.contents()
    assert not [c for c in stored if any(r in c for r in RAW)]
    assert "User: My email is [EMAIL] and I love hiking." in stored
    assert not [c for c in stored if "password" in c.lower()]  # dropped: fact and episode
    assert f"User: My friend {NAME} lives in Berlin." in stored  # names kept
    masked = {h.memory.content: h.memory.masked for h in h.provider.memories.values()}
    assert masked["User: My email is [EMAIL] and I love hiking."] == ("email",)
    assert masked[f"User: My friend {NAME} lives in Berlin."] == ()
    rows = await candidate_rows(h)
    assert not [c for c, _ in rows if any(r in c for r in RAW)]  # the run's rows too
    assert ("User: My email is [EMAIL] and I love hiking.", "email") in rows
    after = (seen("other", "email", "mask"), seen("other", "secret", "drop"),
             seen("other", "name", "keep"))
    assert [a - b for a, b in zip(after, before, strict=True)] >= [1, 1, 1]
    assert "MainThread" not in detector.threads  # detection ran off the event loop


async def test_an_agents_override_changes_the_action_of_its_kinds_only(
        engine: AsyncEngine) -> None:
    h, _ = harness(engine, configs={("t1", "a2"): {
        "long_memory_provider": "MYSQL", "open_long_memory": True, "model": "m",
        "sensitive": {"email": "drop", "secret": "keep", "name": "mask"}}})
    await h.say("c1", SAID, agent="a2")
    await h.say("c2", SAID, agent="a1")
    await h.pipeline.run(h.closed("c1", agent="a2"))
    await h.pipeline.run(h.closed("c2", agent="a1"))
    a2 = [m.memory.content for m in h.provider.memories.values()
          if m.memory.source_event_ids[0].startswith("c1-")]
    a1 = [m.memory.content for m in h.provider.memories.values()
          if m.memory.source_event_ids[0].startswith("c2-")]
    assert not [c for c in a2 if "email" in c]  # dropped for a2
    assert f"User: My password is {PASSWORD} for the wiki." in a2  # kept for a2
    assert "User: My friend [NAME] lives in Berlin." in a2
    assert "User: My email is [EMAIL] and I love hiking." in a1  # the deployment's, for a1
    assert not [c for c in a1 if PASSWORD in c]


async def test_the_deployments_settings_set_the_policy(engine: AsyncEngine) -> None:
    h, _ = harness(engine, settings={"sensitive": {"email": "keep", "card": "drop"}})
    await h.say("c1", [("user", f"My email is {EMAIL}."), ("user", f"Card {CARD} expires.")])
    await h.pipeline.run(h.closed("c1"))
    stored = h.provider.contents()
    assert f"User: My email is {EMAIL}." in stored
    assert not [c for c in stored if "Card" in c or "[CARD]" in c]


async def test_an_unreadable_override_leaves_the_deployments_policy(
        engine: AsyncEngine) -> None:
    h, _ = harness(engine, configs={("t1", "a1"): {
        "open_long_memory": True, "model": "m", "sensitive": {"email": "shred"}}})
    await h.say("c1", SAID[:1])
    await h.pipeline.run(h.closed("c1"))
    assert "User: My email is [EMAIL] and I love hiking." in h.provider.contents()


async def test_screening_off_stores_as_said(engine: AsyncEngine) -> None:
    h, detector = harness(engine, settings={"sensitive": {"enabled": False}})
    await h.say("c1", SAID[:1])
    await h.pipeline.run(h.closed("c1"))
    assert f"User: My email is {EMAIL} and I love hiking." in h.provider.contents()
    assert detector.seen == []


async def test_a_summary_is_masked_never_dropped(engine: AsyncEngine) -> None:
    h, _ = harness(engine)
    lines = [("user", f"Note {i}: my email is {EMAIL}, my password is {PASSWORD}.")
             for i in range(20)]
    await h.say("c1", lines)
    out = await h.pipeline.run(h.closed("c1"))
    assert out.summary == "extractive"
    async with h.engine.connect() as conn:
        row = (await conn.execute(select(conversation_summary))).one()
    assert EMAIL not in row.summary and PASSWORD not in row.summary
    assert "[EMAIL]" in row.summary and "[SECRET]" in row.summary
    assert EMAIL not in h.cache.summaries[("t1", "c1")]["text"]


@pytest.mark.parametrize("policy", [{"email": "keep", "secret": "keep", "card": "keep",
                                     "iban": "keep", "national_id": "keep", "phone": "keep",
                                     "ip": "keep"}])
async def test_a_policy_keeping_everything_detects_nothing(
        engine: AsyncEngine, policy: dict[str, str]) -> None:
    h, detector = harness(engine, settings={"sensitive": policy})
    await h.say("c1", SAID)
    await h.pipeline.run(h.closed("c1"))
    assert detector.seen == []  # names are kept by default too
    assert f"User: My password is {PASSWORD} for the wiki." in h.provider.contents()
