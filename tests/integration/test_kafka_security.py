"""memstream on a secured Kafka: a broker of the test's own with a ``SASL_SSL``
listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER; SCRAM users created
when its storage is formatted) and an ``SSL`` listener requiring a client certificate,
certificates generated here. The command line, the worker and ``MemoryClient``
connect with the settings alone; a wrong password is one clear error and a
non-zero exit, not a retry loop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from streams.adapters.kafka.security import KafkaSecurity
from streams.client import MemoryClient
from tests.integration.conftest import Stack, chat_event
from tests.support.secure_kafka import PASSWORD, USER, SecureKafka
from tests.support.worker import ROOT, WorkerProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafka]:
    kafka = SecureKafka(tmp_path_factory.mktemp("secure-kafka")).start()
    try:
        yield kafka
    finally:
        kafka.stop()


def memstream(env: dict[str, str], *args: str, timeout: float = 90
              ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streams.cli", *args],
                          env={**os.environ, **env}, cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize(("protocol", "mechanism"), [
    ("SASL_SSL", "PLAIN"), ("SASL_SSL", "SCRAM-SHA-256"), ("SASL_SSL", "SCRAM-SHA-512"),
    ("SASL_SSL", "OAUTHBEARER"), ("SSL", "client certificate")])
def test_the_command_line_works_over_each_mechanism(broker: SecureKafka, stack: Stack,
                                                    protocol: str, mechanism: str) -> None:
    env = {**stack.env(), **broker.env(protocol, mechanism)}
    env["MEMSTREAM_KAFKA__CHAT_TOPIC"] += f".{mechanism.lower().replace(' ', '-')}"
    created = memstream(env, "topics", "create")
    assert created.returncode == 0, created.stderr
    listed = memstream(env, "topics", "list")
    assert listed.returncode == 0, listed.stderr
    assert env["MEMSTREAM_KAFKA__CHAT_TOPIC"] in listed.stdout


def test_a_wrong_password_is_one_clear_error(broker: SecureKafka, stack: Stack,
                                             tmp_path: Path) -> None:
    env = {**stack.env(), **broker.env("SASL_SSL", "SCRAM-SHA-512", password="wrong")}
    start = time.monotonic()
    out = memstream(env, "topics", "create")
    assert out.returncode != 0
    assert "refused the credentials" in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert "wrong" not in out.stderr  # the password given is not echoed
    worker = WorkerProcess(env, tmp_path / "worker.log")
    worker.start(wait_ready=False)
    assert worker.proc is not None
    code = worker.proc.wait(90)
    assert code != 0
    log = worker.log_text()
    assert "refused the credentials" in log and "Traceback" not in log, log[-2000:]
    assert time.monotonic() - start < 90  # no waiting out the start timeout


async def test_the_worker_and_memory_client_over_sasl_ssl(broker: SecureKafka, stack: Stack,
                                                          tmp_path: Path) -> None:
    env = broker.env("SASL_SSL", "SCRAM-SHA-256")
    worker = stack.worker(**env).start()
    events = tmp_path / "events.jsonl"
    events.write_text("".join(json.dumps(chat_event(i, "c1", content=f"secure message {i}")) + "\n"
                              for i in range(3)))
    out = memstream({**stack.env(), **env}, "produce", str(events))
    assert out.returncode == 0, out.stderr
    security = KafkaSecurity(protocol="SASL_SSL", sasl_mechanism="PLAIN", username=USER,
                             password=PASSWORD, cafile=str(broker.certs.ca))
    async with MemoryClient(env["MEMSTREAM_KAFKA__BROKER"], request_topic=stack.topics["queries"],
                            reply_topic=f"{stack.name}.replies", timeout_s=20,
                            security=security) as client:
        deadline = time.monotonic() + 60
        while True:
            reply = await client.query(tenant_id="t1", user_id="u1", agent_id="a1",
                                       message="what did I say?", conversation_id="c1")
            window = reply.short_term or {}
            said = [m["content"] for m in window.get("messages", [])]
            if len(said) == 3 or time.monotonic() > deadline:
                break
        assert said == [f"secure message {i}" for i in range(3)], reply

        # a reply topic that does not exist (this broker creates none): given up on
        # after MEMSTREAM_QUERY__REPLY_SEND_TIMEOUT_S, and the worker answers on
        producer = AIOKafkaProducer(bootstrap_servers=env["MEMSTREAM_KAFKA__BROKER"][8:],
                                    **security.client_options())
        await producer.start()
        try:
            await producer.send_and_wait(stack.topics["queries"], json.dumps({
                "tenant_id": "t1", "user_id": "u1", "agent_id": "a1", "message": "hello?"}
            ).encode(), key=b"t1/u1", headers=[
                ("kafka_replyTopic", f"{stack.name}.missing.replies".encode()),
                ("kafka_correlationId", b"lost")])
        finally:
            await producer.stop()
        worker.wait_for_log("not sent within 5.0s", 60)
        again = await client.query(tenant_id="t1", user_id="u1", agent_id="a1",
                                   message="still there?", conversation_id="c1")
        assert again.error is None and again.short_term is not None
    assert "refused" not in worker.log_text()
