"""The hedged-query recipe for Spring Kafka (``tests/interop/spring``,
``HedgedQueries``) against real workers: right after one of two workers is
SIGKILLed, queries with a 1 s deadline sent to its partition are answered in
time by the other, while a plain ``sendAndReceive`` to that partition is not."""

from __future__ import annotations

import asyncio
import subprocess

import pytest

from tests.integration.conftest import Stack
from tests.integration.query_support import QUERY_ENV, query_partitions, two_workers
from tests.integration.spring_support import JAVA, client_classpath
from tests.support.services import KAFKA_BOOTSTRAP

pytestmark = pytest.mark.alone  # it times replies against the caller's deadline

__all__ = ["client_classpath"]

# the dead worker holds its partitions this long: the whole Java run falls inside
QUERY_SESSION_S = 45.0


async def test_a_spring_caller_hedging_as_documented_is_answered_within_its_deadline(
        stack: Stack, client_classpath: str) -> None:
    env = {**QUERY_ENV, "MEMSTREAM_QUERY__SESSION_TIMEOUT_S": str(QUERY_SESSION_S),
           # the client's hedge alone: no worker takes another's requests over
           "MEMSTREAM_QUERY__RESCUE": "false",
           "MEMSTREAM_QUERY__HEARTBEAT_INTERVAL_S": "3"}
    doomed, _ = await two_workers(stack, env)
    dead = min(query_partitions(doomed) or ())
    doomed.kill()
    run = await asyncio.to_thread(
        subprocess.run,
        [str(JAVA), "-cp", client_classpath, "io.memstream.interop.HedgedSpringClient",
         KAFKA_BOOTSTRAP, stack.topics["queries"], f"{stack.name}.hedged-replies",
         f"{stack.name}-query", "t1", str(dead)],
        capture_output=True, text=True, timeout=300)
    print(run.stdout)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "hedged spring client: all checks passed" in run.stdout
