"""Signed queries: a tenant's key proves a request comes from that tenant.

Off unless ``MEMSTREAM_QUERY__REQUIRE_SIGNATURE`` is true. A signed request
carries two headers:

- ``memstream-timestamp``: Unix seconds, decimal (when it was signed);
- ``memstream-signature``: ``v1=`` and the lowercase hex HMAC-SHA256, keyed
  with the tenant's key (UTF-8), of ``{timestamp}.`` followed by the record's
  value, byte for byte.

:func:`refusal` says why a request may not be answered (None: it may): no key
for its tenant, a missing or malformed header, a timestamp further than
``max_age_s`` from now (either way: a replayed or a far-future request), a
signature that does not match (compared in constant time).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

TIMESTAMP = "memstream-timestamp"
SIGNATURE = "memstream-signature"
VERSION = "v1="


def signature(key: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(key.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return VERSION + mac.hexdigest()


def signed_headers(key: str, timestamp: int, body: bytes) -> list[tuple[str, bytes]]:
    return [(TIMESTAMP, str(timestamp).encode()),
            (SIGNATURE, signature(key, timestamp, body).encode())]


def refusal(keys: Mapping[str, str], tenant: str, timestamp: bytes | None,
            signed: bytes | None, body: bytes, *, now: float, max_age_s: float) -> str | None:
    key = keys.get(tenant)
    if key is None:
        return "no signing key is configured for this tenant"
    if timestamp is None or signed is None:
        return f"the request is not signed ({TIMESTAMP} and {SIGNATURE} headers)"
    try:
        when = int(timestamp.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return f"{TIMESTAMP} is not a number of seconds"
    if abs(now - when) > max_age_s:
        return f"{TIMESTAMP} is more than {max_age_s:g}s from now"
    if not hmac.compare_digest(signed, signature(key, when, body).encode()):
        return "the signature does not match"
    return None
