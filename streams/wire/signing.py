"""Signed queries: a tenant's key proves a request comes from that tenant.

Off unless ``MEMSTREAM_QUERY__REQUIRE_SIGNATURE`` is true. A signed request
carries two headers:

- ``memstream-timestamp``: Unix seconds, decimal (when it was signed);
- ``memstream-signature``: ``v2=`` and the lowercase hex HMAC-SHA256, keyed
  with the tenant's key (UTF-8), of :func:`signed_bytes`:
  ``{timestamp}.{reply topic}.{reply partition}.{correlation id}.`` followed by
  the record's value, byte for byte. The reply topic (``kafka_replyTopic``), the
  reply partition (``kafka_replyPartition``, decimal; empty when the request has
  none) and the correlation id (``kafka_correlationId``, its bytes in lowercase
  hex; empty when none) are signed, so that a captured request cannot be re-sent
  to have its reply go to another topic or partition, or under another
  correlation id.

:func:`refusal` says why a request may not be answered (None: it may): no key
for its tenant, a missing or malformed header, a ``v1=`` signature (it covers
neither the correlation id nor the reply partition), a timestamp further than
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
from streams.wire.spring_reply import CORRELATION_ID, REPLY_PARTITION

VERSION = "v2="
V1 = b"v1="
V1_REFUSED = ("v1 signatures do not cover the correlation id and reply partition; "
              "sign as docs/security.md says (v2)")


_DIGITS = re.compile(rb"[0-9]{1,12}")


def signed_bytes(timestamp: int, reply_topic: str, reply_partition: int | None,
                 correlation_id: bytes | None, body: bytes) -> bytes:
    """What the signature is the HMAC of, for the signer and the verifier both."""
    partition = "" if reply_partition is None else str(reply_partition)
    cid = "" if correlation_id is None else correlation_id.hex()
    return f"{timestamp}.{reply_topic}.{partition}.{cid}.".encode() + body


def signature(key: str, timestamp: int, reply_topic: str, reply_partition: int | None,
              correlation_id: bytes | None, body: bytes) -> str:
    signed = signed_bytes(timestamp, reply_topic, reply_partition, correlation_id, body)
    return VERSION + hmac.new(key.encode(), signed, hashlib.sha256).hexdigest()


def signed_headers(key: str, timestamp: int, reply_topic: str, reply_partition: int | None,
                   correlation_id: bytes | None, body: bytes) -> list[tuple[str, bytes]]:
    sig = signature(key, timestamp, reply_topic, reply_partition, correlation_id, body)
    return [(TIMESTAMP, str(timestamp).encode()), (SIGNATURE, sig.encode())]


def refusal(keys: Mapping[str, str], tenant: str, timestamp: bytes | None,
            signed: bytes | None, reply_topic: str, reply_partition: int | None,
            correlation_id: bytes | None, body: bytes, *, now: float,
            max_age_s: float) -> str | None:
    key = keys.get(tenant)
    if key is None:
        return "no signing key is configured for this tenant"
    if timestamp is None or signed is None:
        return f"the request is not signed ({TIMESTAMP} and {SIGNATURE} headers)"
    if signed.startswith(V1):
        return V1_REFUSED
    if not _DIGITS.fullmatch(timestamp):
        return f"{TIMESTAMP} is not a number of seconds"
    when = int(timestamp)
    if abs(now - when) > max_age_s:
        return f"{TIMESTAMP} is more than {max_age_s:g}s from now"
    expected = signature(key, when, reply_topic, reply_partition, correlation_id, body)
    if not hmac.compare_digest(signed, expected.encode()):
        return "the signature does not match"
    return None


@dataclass(frozen=True)
class Signing:
    """Signed requests required: the tenants' keys and how old a signature may be."""

    keys: Mapping[str, str]
    max_age_s: float = 300.0

    def refusal(self, tenant: str, headers: Headers, body: bytes | None, reply_topic: str,
                now: float) -> str | None:
        """Why a request with these headers and body may not be served (None: it may).
        The correlation id and reply partition signed are read from ``headers``."""
        raw = header(headers, REPLY_PARTITION)
        if raw is not None and len(raw) != 4:  # refused earlier when a reply topic is named
            return f"{REPLY_PARTITION} must be a 4-byte big-endian int"
        partition = None if raw is None else int.from_bytes(raw, "big", signed=True)
        return refusal(self.keys, tenant, header(headers, TIMESTAMP), header(headers, SIGNATURE),
                       reply_topic, partition, header(headers, CORRELATION_ID), body or b"",
                       now=now, max_age_s=self.max_age_s)

    def signed_again(self, tenant: str, headers: Headers, body: bytes, reply_topic: str,
                     now: float) -> Headers:
        """``headers`` of a request this worker accepted, its signature made anew at
        ``now`` with the tenant's key (a request memstream puts back in its queue would
        otherwise come back older than ``max_age_s``). Everything else stays."""
        raw = header(headers, REPLY_PARTITION)
        partition = None if raw is None else int.from_bytes(raw, "big", signed=True)
        kept = [(k, v) for k, v in headers if k not in (TIMESTAMP, SIGNATURE)]
        return kept + signed_headers(self.keys[tenant], int(now), reply_topic, partition,
                                     header(headers, CORRELATION_ID), body)
