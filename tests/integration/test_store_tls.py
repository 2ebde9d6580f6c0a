"""MySQL (MariaDB requiring TLS) and Redis (TLS only), both with passwords:
memstream migrates, ingests and answers from the Session cache with the URLs
alone (``?ssl_ca=`` / ``rediss://``); a URL without TLS is refused by the
server, with one clear error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
import redis

from tests.integration.conftest import Stack, chat_event
from tests.support.secure_kafka import Certs, make_certs
from tests.support.tls_stores import TlsMariaDB, TlsRedis
from tests.support.worker import ROOT, eventually


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("store-certs"))


@pytest.fixture(scope="module")
def mariadb(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[TlsMariaDB]:
    db = TlsMariaDB(tmp_path_factory.mktemp("tls-mariadb"), certs).start()
    try:
        yield db
    finally:
        db.stop()


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory: pytest.TempPathFactory, certs: Certs) -> Iterator[TlsRedis]:
    r = TlsRedis(tmp_path_factory.mktemp("tls-redis"), certs).start()
    try:
        yield r
    finally:
        r.stop()


def memstream(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "streams.cli", *args],
                          env={**os.environ, **env}, cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def test_a_database_url_without_tls_is_refused(stack: Stack, mariadb: TlsMariaDB) -> None:
    out = memstream({**stack.env(), "MEMSTREAM_DATABASE__URL": mariadb.url(tls=False)},
                    "db", "upgrade")
    assert out.returncode != 0
    assert "Access denied" in out.stderr or "insecure transport" in out.stderr, out.stderr
    assert "db-pw-9" not in out.stderr  # the password is not printed


async def test_migrate_ingest_and_answer_over_tls(stack: Stack, mariadb: TlsMariaDB,
                                                  tls_redis: TlsRedis) -> None:
    env = {"MEMSTREAM_DATABASE__URL": mariadb.url(), "MEMSTREAM_REDIS__URL": tls_redis.url()}
    out = memstream({**stack.env(), **env}, "db", "upgrade")
    assert out.returncode == 0, out.stderr
    stack.worker(**env).start()
    await stack.produce([chat_event(i, "c1", content=f"over tls {i}") for i in range(3)])
    client = redis.Redis.from_url(tls_redis.url())
    try:
        await eventually(lambda: bool(client.keys(f"{stack.name}*")), 60, "keys in the TLS Redis")
        with pytest.raises(redis.AuthenticationError):
            redis.Redis.from_url(tls_redis.url(password="wrong")).ping()
    finally:
        client.close()

    def answered() -> bool:
        q = memstream({**stack.env(), **env}, "query", "--tenant", "t1", "--user", "u1",
                      "--agent", "a1", "--conversation", "c1", "--timeout", "20",
                      "what did I say")
        if q.returncode != 0:
            return False
        window = json.loads(q.stdout).get("short_term") or {}
        return [m["content"] for m in window.get("messages", [])] == [
            f"over tls {i}" for i in range(3)] and window.get("source") == "cache"

    await eventually(answered, 60, "the Session window from the TLS cache")
    rows = subprocess.run(
        ["mariadb", "-h127.0.0.1", f"-P{mariadb.port}", "-umemstream", "-pdb-pw-9",
         f"--ssl-ca={mariadb.certs.ca}", "-N", "-e",
         "SELECT COUNT(*) FROM memstream.conversation_message"],
        capture_output=True, text=True, check=True)
    assert rows.stdout.strip() == "3"
