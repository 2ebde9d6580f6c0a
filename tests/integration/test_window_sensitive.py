"""The Session window and sensitive content, through Kafka with the worker's real
scanner, Redis and MariaDB: by default a query's Session window returns the chat
as said (the customer's record); with ``MEMSTREAM_SENSITIVE__SESSION_WINDOW`` on,
the same window comes back with the e-mail masked and the message holding a password
left out (the window built from what is left, alternating), the stored history is
unchanged, and the worker counts what it did."""

from __future__ import annotations

import json

import httpx

from streams.wire.query import MemoryReply
from tests.integration.conftest import Stack, chat_event
from tests.integration.consolidation_support import FAST, memstream
from tests.integration.erasure_support import ask_every_worker
from tests.support.worker import eventually

EMAIL, PASSWORD = "ann.lee@fastmail.com", "Tr0ub4dor&3x"
SAID = [f"You can reach me at {EMAIL} any time.", "Sure.",
        f"My password is {PASSWORD} for the team wiki.", "Noted.",
        "My sister is called Ana.", "Nice."]


def contents(reply: MemoryReply) -> list[str]:
    assert reply.error is None, reply.error
    return [str(m["content"]) for m in (reply.short_term or {}).get("messages", [])]


async def windows(stack: Stack) -> list[list[str]]:
    return [contents(r) for r in await ask_every_worker(stack, tenant="t1", user="u1",
                                                        conversation="c1")]


async def test_the_session_window_is_screened_only_when_asked(stack: Stack) -> None:
    stack.extra_env.update(FAST)
    stack.extra_env["MEMSTREAM_CONSOLIDATION__DEFAULT_LONG_MEMORY"] = "false"
    plain = stack.worker().start()
    await stack.produce([chat_event(i, "c1", content=text) for i, text in enumerate(SAID)])

    async def whole() -> bool:
        return all(len(w) == len(SAID) for w in await windows(stack))
    await eventually(whole, 60, "the whole window")
    assert all(w == SAID for w in await windows(stack))  # off: as said

    plain.stop()
    stack.extra_env["MEMSTREAM_SENSITIVE__SESSION_WINDOW"] = "true"
    worker = stack.worker().start()
    for window in await windows(stack):  # built from what is left: still alternating
        assert window == ["You can reach me at [EMAIL] any time.", "Noted.",
                          "My sister is called Ana.", "Nice."], window
    stored = json.loads(memstream(stack, "history", "c1", "--tenant", "t1").stdout)
    assert [m["content"] for m in stored["messages"]] == SAID  # the stored record as said

    assert EMAIL not in worker.log_text() and PASSWORD not in worker.log_text()
    metrics = httpx.get(f"http://127.0.0.1:{worker.env['MEMSTREAM_WEB__PORT']}/metrics",
                        timeout=5).text
    for kind, action in (("email", "mask"), ("secret", "drop")):
        assert (f'memstream_sensitive_window_messages_total{{action="{action}",kind="{kind}",'
                f'tenant="other"}}') in metrics
