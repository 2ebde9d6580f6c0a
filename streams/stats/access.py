"""Who may read the stats API: bearer tokens mapped to the tenants they may read.

Tokens are configured by their SHA-256 (``MEMSTREAM_WEB__STATS_TOKENS``), never
in clear: a token is 32 random bytes (:func:`new_token`), so a plain hash is
as strong as a password hash would be and costs nothing per request. A
presented token is hashed and compared with *every* configured hash in
constant time (:func:`hmac.compare_digest`, no early exit), so the time of a
refusal says nothing about how close a guess was.

:meth:`StatsAccess.check` decides, before any query runs:

- no ``Authorization: Bearer <token>`` header, or an unknown token -> 401
  (``WWW-Authenticate: Bearer``); with no token configured every request is
  401: the API is closed until a token is set;
- a known token asking for a tenant it does not hold -> 403;
- otherwise allowed. ``"*"`` among a token's tenants reads every tenant.

The tenant is compared as the API compares it (exactly, as stored).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

ALL_TENANTS = "*"
TOKEN_BYTES = 32


@dataclass(frozen=True)
class TokenGrant:
    """One configured token: its SHA-256 (hex) and the tenants it may read."""

    sha256: str
    tenants: frozenset[str]


@dataclass(frozen=True)
class Decision:
    status: int  # 200: go on; 401 or 403: answer with ``body``
    code: str = ""
    message: str = ""

    @property
    def allowed(self) -> bool:
        return self.status == 200

    def body(self) -> dict[str, dict[str, str]]:
        return {"error": {"code": self.code, "message": self.message}}


ALLOWED = Decision(200)


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_hash(token: str) -> str:
    # surrogateescape: header bytes that are not UTF-8 hash too (and match nothing)
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()


def bearer(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (scheme case-insensitive)."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class StatsAccess:
    def __init__(self, grants: Iterable[TokenGrant]) -> None:
        self._grants: Sequence[TokenGrant] = tuple(grants)

    @property
    def configured(self) -> bool:
        return bool(self._grants)

    def _grant(self, token: str) -> TokenGrant | None:
        presented = token_hash(token).encode()
        found = None
        for grant in self._grants:  # every one, whatever matched
            if hmac.compare_digest(presented, grant.sha256.lower().encode()):
                found = grant
        return found

    def check(self, authorization: str | None, tenant: str | None) -> Decision:
        """May the holder of ``authorization`` read ``tenant`` (None: no tenant asked)?"""
        token = bearer(authorization)
        if not self._grants:
            return Decision(401, "unauthorized", "the stats API needs a bearer token and none "
                                                 "is configured (MEMSTREAM_WEB__STATS_TOKENS)")
        grant = self._grant(token) if token is not None else None
        if grant is None:
            return Decision(401, "unauthorized", "a valid bearer token is required")
        if tenant is None or ALL_TENANTS in grant.tenants or tenant in grant.tenants:
            return ALLOWED
        return Decision(403, "forbidden", "this token may not read that tenant")
