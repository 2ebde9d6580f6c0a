"""Signed queries: table-driven."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from streams.wire.headers import SIGNATURE, SIGNED_AT
from streams.wire.signing import Signing, refusal, signature, signed_headers
from streams.wire.spring_reply import CORRELATION_ID, REPLY_PARTITION, request_headers

KEYS = {"acme": "acme-key", "beta": "beta-key"}
BODY = b'{"tenant_id":"acme","user_id":"u1","agent_id":"a1","message":"hi"}'
NOW = 1_800_000_000


TOPIC = "acme.replies"
PARTITION = 3
CID = bytes.fromhex("0f1e2d3c4b5a69788796a5b4c3d2e1f0")
OTHER_CID = bytes.fromhex("0f1e2d3c4b5a69788796a5b4c3d2e1f1")


def good(ts: int = NOW, key: str = "acme-key", body: bytes = BODY, topic: str = TOPIC,
         partition: int | None = PARTITION, cid: bytes | None = CID) -> tuple[bytes, bytes]:
    (_, t), (_, s) = signed_headers(key, ts, topic, partition, cid, body)
    return t, s


def v1(ts: int = NOW, key: str = "acme-key", body: bytes = BODY,
       topic: str = TOPIC) -> tuple[bytes, bytes]:
    """A signature of the format before v2: it covers neither cid nor partition."""
    mac = hmac.new(key.encode(), f"{ts}.{topic}.".encode() + body, hashlib.sha256)
    return str(ts).encode(), b"v1=" + mac.hexdigest().encode()


@pytest.mark.parametrize(("tenant", "headers", "body", "why"), [
    ("acme", good(), BODY, None),
    ("acme", good(NOW - 299), BODY, None),
    ("acme", good(NOW + 299), BODY, None),  # a clock a little ahead
    ("acme", good(NOW - 301), BODY, "from now"),
    ("acme", good(NOW + 301), BODY, "from now"),
    ("acme", good(key="beta-key"), BODY, "does not match"),  # another tenant's key
    ("beta", good(), BODY, "does not match"),  # acme's signature, claiming beta
    ("gamma", good(), BODY, "no signing key"),
    ("acme", good(), BODY + b" ", "does not match"),  # the body changed
    ("acme", (None, good()[1]), BODY, "not signed"),
    ("acme", (good()[0], None), BODY, "not signed"),
    ("acme", (b"soon", good()[1]), BODY, "not a number"),
    ("acme", (b"\xff", good()[1]), BODY, "not a number"),
    ("acme", (good()[0], good()[1].upper()), BODY, "does not match"),
    ("acme", (good()[0], good()[1][3:]), BODY, "does not match"),  # no version prefix
    ("acme", good(topic="attacker.replies"), BODY, "does not match"),  # replayed elsewhere
    ("acme", (b"+" + good()[0], good()[1]), BODY, "not a number"),  # int() would take these
    ("acme", (b" " + good()[0], good()[1]), BODY, "not a number"),
    ("acme", (good()[0] + b"\n", good()[1]), BODY, "not a number"),
    ("acme", (b"1_800_000_000", good()[1]), BODY, "not a number"),
    ("acme", (b"9" * 13, good()[1]), BODY, "not a number"),
    ("acme", v1(), BODY, "v1 signatures do not cover the correlation id and reply partition"),
    ("acme", v1(NOW - 3600), BODY, "v1 signatures"),  # refused as v1, whatever its age
    ("gamma", v1(), BODY, "no signing key"),
])
def test_refusal(tenant: str, headers: tuple[bytes | None, bytes | None], body: bytes,
                 why: str | None) -> None:
    got = refusal(KEYS, tenant, headers[0], headers[1], TOPIC, PARTITION, CID, body,
                  now=NOW, max_age_s=300)
    assert (got is None) if why is None else (got is not None and why in got), got


@pytest.mark.parametrize(("signed_for", "sent_with", "why"), [
    ((PARTITION, CID), (PARTITION, CID), None),
    ((PARTITION, CID), (PARTITION, OTHER_CID), "does not match"),  # another correlation id
    ((PARTITION, CID), (PARTITION + 1, CID), "does not match"),  # another reply partition
    ((PARTITION, CID), (0, CID), "does not match"),
    ((PARTITION, CID), (None, CID), "does not match"),  # the partition header dropped
    ((None, CID), (PARTITION, CID), "does not match"),  # a partition header added
    ((None, CID), (None, CID), None),
    ((PARTITION, CID), (PARTITION, None), "does not match"),  # the correlation id dropped
    ((PARTITION, None), (PARTITION, CID), "does not match"),
    ((PARTITION, None), (PARTITION, None), None),
    ((0, CID), (None, CID), "does not match"),  # partition 0 is not "no partition"
])
def test_the_correlation_id_and_reply_partition_are_signed(
        signed_for: tuple[int | None, bytes | None], sent_with: tuple[int | None, bytes | None],
        why: str | None) -> None:
    ts, sig = good(partition=signed_for[0], cid=signed_for[1])
    got = refusal(KEYS, "acme", ts, sig, TOPIC, sent_with[0], sent_with[1], BODY,
                  now=NOW, max_age_s=300)
    assert (got is None) if why is None else (got is not None and why in got), got


def _replace(headers: list[tuple[str, bytes]], name: str,
             value: bytes | None) -> list[tuple[str, bytes]]:
    out = [(k, v) for k, v in headers if k != name]
    return out if value is None else [*out, (name, value)]


SIGNED = request_headers(TOPIC, CID, PARTITION) + signed_headers(
    "acme-key", NOW, TOPIC, PARTITION, CID, BODY)


@pytest.mark.parametrize(("headers", "why"), [
    (SIGNED, None),
    (_replace(SIGNED, CORRELATION_ID, OTHER_CID), "does not match"),
    (_replace(SIGNED, CORRELATION_ID, None), "does not match"),
    (_replace(SIGNED, REPLY_PARTITION, (PARTITION + 1).to_bytes(4, "big")), "does not match"),
    (_replace(SIGNED, REPLY_PARTITION, None), "does not match"),
    (_replace(SIGNED, REPLY_PARTITION, b"\x03"), "4-byte"),
    (request_headers(TOPIC, CID) + signed_headers("acme-key", NOW, TOPIC, None, CID, BODY),
     None),
    ([*request_headers(TOPIC, CID, PARTITION), (SIGNED_AT, v1()[0]), (SIGNATURE, v1()[1])],
     "v1 signatures"),
])
def test_signing_reads_the_correlation_id_and_partition_from_the_headers(
        headers: list[tuple[str, bytes]], why: str | None) -> None:
    got = Signing(KEYS).refusal("acme", headers, BODY, TOPIC, NOW)
    assert (got is None) if why is None else (got is not None and why in got), got


def test_signature_is_the_documented_hmac() -> None:
    # echo -n '1800000000.acme.replies.3.0f1e…e1f0.{...}' | openssl dgst -sha256 -hmac acme-key
    expected = hmac.new(b"acme-key", b"1800000000.acme.replies.3.0f1e2d3c4b5a69788796a5b4c3d2e1f0."
                        + BODY, hashlib.sha256).hexdigest()
    assert signature("acme-key", NOW, TOPIC, PARTITION, CID, BODY) == "v2=" + expected
    without = hmac.new(b"acme-key", b"1800000000.acme.replies..." + BODY,
                       hashlib.sha256).hexdigest()
    assert signature("acme-key", NOW, TOPIC, None, None, BODY) == "v2=" + without
