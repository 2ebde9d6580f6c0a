"""A statement the database refuses for good blocks only its own erasure (issue 41,
finding 4), on a worker over Kafka, MariaDB and Redis.

An operator's table holds a foreign key to one of user ``u1``'s messages, so
MariaDB refuses to delete it (error 1451, a constraint: no attempt can mend it).
Before, every database error was waited out: that erasure was retried in place
for ever, and the single-partition erasure queue stopped for every tenant. Now
the erasure of ``u1`` is answered ``blocked`` (``error.code: database``, the
driver's class and error number, no statement), its record says ``blocked`` with
the error, ``memstream_erasures_blocked_total{code="database"}`` counts it, and
the erasure of ``u2`` sent right after it is carried out. Once the constraint is
gone, the same request starts it again and finishes it.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.integration.conftest import Stack, chat_event, session_end_event
from tests.integration.consolidation_support import FAST, run_status
from tests.integration.erasure_support import erase, subject_rows
from tests.support.worker import eventually

pytestmark = pytest.mark.integration


def said(conv: str, user: str) -> list[dict[str, Any]]:
    lines = ["I live in Oslo.", "Noted.", "My dog is called Rex.", "Sweet."]
    return [*(chat_event(i, conv, user_id=user, content=text,
                         created_at=f"2026-11-30T08:00:{i:02d}Z")
              for i, text in enumerate(lines)),
            session_end_event(conv, user_id=user, created_at="2026-11-30T08:00:10Z")]


async def test_a_refused_delete_blocks_its_erasure_and_the_next_one_is_done(
        stack: Stack) -> None:
    stack.extra_env.update(FAST)
    worker = stack.worker().start()
    await stack.produce([*said("c1", "u1"), *said("c2", "u2")])
    for conv in ("c1", "c2"):
        await eventually(lambda conv=conv: run_status(stack, f"t1/{conv}#1") == "done",  # type: ignore[misc]
                         90, f"{conv} consolidated")
    stack.sql("CREATE TABLE audit_hold (message_id BIGINT NOT NULL, FOREIGN KEY (message_id) "
              "REFERENCES conversation_message (id)) ENGINE=InnoDB;"
              "INSERT INTO audit_hold SELECT MIN(id) FROM conversation_message "
              "WHERE tenant_id = 't1' AND user_id = 'u1'")

    blocked = erase(stack, "--tenant", "t1", "--user", "u1", "--id", "held", check=False)
    assert blocked.get("status") == "blocked", blocked
    assert blocked["error"]["code"] == "database", blocked
    assert "IntegrityError 1451" in blocked["error"]["message"], blocked
    assert "u1" not in blocked["error"]["message"]  # no statement, no value
    [[status, error]] = stack.sql("SELECT status, error FROM erasure WHERE erasure_id = 'held'")
    assert status == "blocked" and "IntegrityError 1451" in error, (status, error)

    done = erase(stack, "--tenant", "t1", "--user", "u2", "--id", "next")
    assert done["status"] == "done" and done["counts"]["conversation_message"] == 4, done
    assert subject_rows(stack, "t1", user="u2", conversations=["c2"]) == {}
    metrics = httpx.get(f"http://127.0.0.1:{worker.env['MEMSTREAM_WEB__PORT']}/metrics",
                        timeout=10).text
    assert 'memstream_erasures_blocked_total{code="database"} 1.0' in metrics

    stack.sql("DROP TABLE audit_hold")
    again = erase(stack, "--tenant", "t1", "--user", "u1", "--id", "held")
    assert again["status"] == "done", again
    assert subject_rows(stack, "t1", user="u1", conversations=["c1"]) == {}
    [[status, error]] = stack.sql("SELECT status, COALESCE(error, '-') FROM erasure "
                                  "WHERE erasure_id = 'held'")
    assert (status, error) == ("done", "-")
