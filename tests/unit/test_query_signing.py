"""Signed queries: table-driven."""

from __future__ import annotations

import pytest

from streams.wire.signing import refusal, signature, signed_headers

KEYS = {"acme": "acme-key", "beta": "beta-key"}
BODY = b'{"tenant_id":"acme","user_id":"u1","agent_id":"a1","message":"hi"}'
NOW = 1_800_000_000


TOPIC = "acme.replies"


def good(ts: int = NOW, key: str = "acme-key", body: bytes = BODY,
         topic: str = TOPIC) -> tuple[bytes, bytes]:
    (_, t), (_, s) = signed_headers(key, ts, topic, body)
    return t, s


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
])
def test_refusal(tenant: str, headers: tuple[bytes | None, bytes | None], body: bytes,
                 why: str | None) -> None:
    got = refusal(KEYS, tenant, headers[0], headers[1], TOPIC, body, now=NOW, max_age_s=300)
    assert (got is None) if why is None else (got is not None and why in got), got


def test_signature_is_the_documented_hmac() -> None:
    # echo -n '1800000000.acme.replies.{...}' | openssl dgst -sha256 -hmac acme-key
    import hashlib
    import hmac
    expected = hmac.new(b"acme-key", b"1800000000.acme.replies." + BODY,
                        hashlib.sha256).hexdigest()
    assert signature("acme-key", NOW, TOPIC, BODY) == "v1=" + expected
