"""Masked memories through the rest of their life, on a worker over Kafka and MariaDB
with the built-in provider: erasing a user removes their masked memories with the
others (and another user's stay); a changed policy (e-mail addresses masked, then
dropped; phone numbers kept, then masked) is applied to the old memories by
``memstream reprocess``: the memories holding an e-mail address go, those holding a
phone number are written again masked, and no memory left holds the number as
said; ``memstream memories`` shows which kinds were masked in each."""

from __future__ import annotations

import json

from tests.integration.conftest import Stack, chat_event, session_end_event
from tests.integration.consolidation_support import FAST, memstream, run_status, set_agent
from tests.integration.erasure_support import erase
from tests.support.worker import eventually

PHONE = "+44 20 7946 0958"
SAID = {
    "u1": [f"My phone number is {PHONE}.", "Noted.",
           "My email address is ann.lee@fastmail.com.", "Noted.",
           "My sister is called Ana.", "Nice."],
    "u2": ["My email address is bo.chen@fastmail.com.", "Noted.",
           "My dog is called Rex.", "Nice."],
}
CONVERSATION = {"u1": "c1", "u2": "c2"}


def said(user: str) -> list[dict[str, object]]:
    conv = CONVERSATION[user]
    return [*(chat_event(i, conv, user_id=user, content=text)
              for i, text in enumerate(SAID[user])),
            session_end_event(conv, user_id=user)]


def held(stack: Stack, user: str, *, valid_only: bool = True) -> dict[str, str]:
    """The user's memories in the memory table (but the assistant's episodes): content ->
    masked kinds."""
    rows = stack.sql("SELECT content, COALESCE(masked, '') FROM memory WHERE tenant_id = 't1' "
                     f"AND user_id = '{user}' AND content NOT LIKE 'Assistant:%'"
                     + (" AND valid_to IS NULL" if valid_only else ""))
    return {r[0]: r[1] for r in rows}


def listed(stack: Stack, user: str) -> dict[str, list[str]]:
    """``memstream memories`` of the user: content -> masked kinds."""
    out = memstream(stack, "memories", "--tenant", "t1", "--user", user, "--agent", "a1",
                    "--format", "json")
    return {m["content"]: m["masked"] for m in json.loads(out.stdout)
            if not m["content"].startswith("Assistant:")}


async def test_erasure_and_reprocess_on_masked_memories(stack: Stack) -> None:
    stack.extra_env.update(FAST)
    set_agent(stack, "t1", "a1", "--provider", "MYSQL", "--open-long-memory", "on",
              "--model", "chat-model", "--sensitive", "phone=keep")  # e-mail: mask
    stack.worker().start()
    await stack.produce([*said("u1"), *said("u2")])
    await eventually(lambda: run_status(stack, "t1/c1#1") == "done"
                     and run_status(stack, "t1/c2#1") == "done", 90, "both sessions")
    first = held(stack, "u1")
    assert first == {
        f"My phone number is {PHONE}.": "", f"User: My phone number is {PHONE}.": "",
        "My email address is [EMAIL].": "email", "User: My email address is [EMAIL].": "email",
        "My sister is called Ana.": "", "User: My sister is called Ana.": ""}, first
    assert held(stack, "u2")["User: My email address is [EMAIL]."] == "email"

    # (a) erasing u2 removes their masked memories with the rest; u1 keeps everything
    receipt = erase(stack, "--tenant", "t1", "--user", "u2")
    assert receipt["status"] == "done" and receipt["counts"]["memory"] == 6, receipt
    assert held(stack, "u2", valid_only=False) == {}
    assert held(stack, "u1") == first

    # (b) the policy changes; reprocessing applies it to the old memories
    set_agent(stack, "t1", "a1", "--sensitive", "email=drop", "--sensitive", "phone=mask")
    out = memstream(stack, "reprocess", "--tenant", "t1", "--quiet")
    report = json.loads(out.stdout)
    assert report["sessions"] == 1, report  # u2's session was erased: not rebuilt
    now = held(stack, "u1")
    assert now == {
        "My phone number is [PHONE].": "phone", "User: My phone number is [PHONE].": "phone",
        "My sister is called Ana.": "", "User: My sister is called Ana.": ""}, now
    # the two phone memories written again masked, the two e-mail ones gone (the rest,
    # the assistant's episodes among them, kept as they were)
    assert (report["written"], report["kept"], report["retired"]) == (2, 5, 4), report
    # the old phone memories are deleted, not kept expired; the masked e-mail ones expired
    everything = held(stack, "u1", valid_only=False)
    assert not [c for c in everything if PHONE in c], everything
    assert "User: My email address is [EMAIL]." in everything
    assert listed(stack, "u1") == {content: [kinds] if kinds else []
                                   for content, kinds in now.items()}
    assert held(stack, "u2", valid_only=False) == {}  # nothing erased comes back
