"""Signed queries: a tenant's key proves a request comes from that tenant.

Off unless ``MEMSTREAM_QUERY__REQUIRE_SIGNATURE`` is true. A signed request
carries two headers:

- ``memstream-timestamp``: Unix seconds, decimal (when it was signed);
- ``memstream-signature``: ``v1=`` and the lowercase hex HMAC-SHA256, keyed
  with the tenant's key (UTF-8), of ``{timestamp}.{reply topic}.`` followed by
  the record's value, byte for byte. The reply topic (``kafka_replyTopic``) is
  signed so that a captured request cannot be replayed to another topic.

:func:`refusal` says why a request may not be answered (None: it may): no key
for its tenant, a missing or malformed header, a timestamp further than
``max_age_s`` from now (either way: a replayed or a far-future request), a
signature that does not match (compared in constant time). The timestamp must
be plain ASCII digits (no sign, blank or separator): the bytes signed are the
header's bytes.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass

from streams.wire.headers import SIGNATURE, Headers, header
from streams.wire.headers import SIGNED_AT as TIMESTAMP

VERSION = "v1="


_DIGITS = re.compile(rb"[0-9]{1,12}")


def signature(key: str, timestamp: int, reply_topic: str, body: bytes) -> str:
    signed = f"{timestamp}.{reply_topic}.".encode() + body
    return VERSION + hmac.new(key.encode(), signed, hashlib.sha256).hexdigest()


def signed_headers(key: str, timestamp: int, reply_topic: str,
                   body: bytes) -> list[tuple[str, bytes]]:
    return [(TIMESTAMP, str(timestamp).encode()),
            (SIGNATURE, signature(key, timestamp, reply_topic, body).encode())]


def refusal(keys: Mapping[str, str], tenant: str, timestamp: bytes | None,
            signed: bytes | None, reply_topic: str, body: bytes, *, now: float,
            max_age_s: float) -> str | None:
    key = keys.get(tenant)
    if key is None:
        return "no signing key is configured for this tenant"
    if timestamp is None or signed is None:
        return f"the request is not signed ({TIMESTAMP} and {SIGNATURE} headers)"
    if not _DIGITS.fullmatch(timestamp):
        return f"{TIMESTAMP} is not a number of seconds"
    when = int(timestamp)
    if abs(now - when) > max_age_s:
        return f"{TIMESTAMP} is more than {max_age_s:g}s from now"
    if not hmac.compare_digest(signed, signature(key, when, reply_topic, body).encode()):
        return "the signature does not match"
    return None


@dataclass(frozen=True)
class Signing:
    """Signed requests required: the tenants' keys and how old a signature may be."""

    keys: Mapping[str, str]
    max_age_s: float = 300.0

    def refusal(self, tenant: str, headers: Headers, body: bytes | None, reply_topic: str,
                now: float) -> str | None:
        """Why a request with these headers and body may not be served (None: it may)."""
        return refusal(self.keys, tenant, header(headers, TIMESTAMP), header(headers, SIGNATURE),
                       reply_topic, body or b"", now=now, max_age_s=self.max_age_s)
