"""A real Spring Kafka client (spring-kafka from Maven Central, the machine's
Java 17) against a real worker: a conversation published and ended with
Jackson's defaults, memory asked for with ``ReplyingKafkaTemplate``, replies
matched by correlation id, a malformed query's error turned into an exception
by a ``replyErrorChecker`` (``tests/interop/spring``)."""

from __future__ import annotations

import subprocess

from tests.integration.conftest import Stack
from tests.integration.consolidation_support import run_status
from tests.integration.spring_support import JAVA, client_classpath
from tests.support.services import KAFKA_BOOTSTRAP
from tests.support.worker import eventually

__all__ = ["client_classpath"]


async def test_a_spring_client_publishes_ends_and_asks(stack: Stack, client_classpath: str) -> None:
    stack.worker().start()
    t = stack.topics
    run = subprocess.run(
        [str(JAVA), "-cp", client_classpath, "io.memstream.interop.SpringClient",
         KAFKA_BOOTSTRAP, t["chat"], t["queries"], f"{stack.name}.spring-replies", "spring"],
        capture_output=True, text=True, timeout=300)
    print(run.stdout)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "spring client: all checks passed" in run.stdout
    rows = stack.sql("SELECT event_id, session_seq FROM conversation_message "
                     "WHERE tenant_id = 'spring' ORDER BY id")
    assert [tuple(r) for r in rows] == [("spring-0", "1"), ("spring-1", "1"), ("spring-2", "1")]
    # the session end (created_at as Jackson writes an Instant) closed the session
    await eventually(lambda: run_status(stack, "spring/spring-conv#1") == "done", 60,
                     "the Spring conversation consolidated")
