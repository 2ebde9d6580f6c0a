"""Who may read the stats API: table-driven."""

from __future__ import annotations

import pytest

from streams.stats.access import StatsAccess, TokenGrant, bearer, new_token, token_hash

ADMIN, ACME, BOTH = "admin-token", "acme-token", "both-token"
ACCESS = StatsAccess([
    TokenGrant(token_hash(ADMIN), frozenset({"*"})),
    TokenGrant(token_hash(ACME), frozenset({"acme"})),
    TokenGrant(token_hash(BOTH).upper(), frozenset({"acme", "beta"})),  # hex in any case
])


@pytest.mark.parametrize(("header", "tenant", "status"), [
    (None, "acme", 401),
    ("", "acme", 401),
    ("Bearer", "acme", 401),
    ("Bearer ", "acme", 401),
    ("Basic YWRtaW46YWRtaW4=", "acme", 401),
    (f"Token {ADMIN}", "acme", 401),
    ("Bearer wrong", "acme", 401),
    (f"Bearer {ADMIN}x", "acme", 401),
    (f"Bearer {token_hash(ADMIN)}", "acme", 401),  # the hash is not the token
    (f"Bearer {ADMIN}", "acme", 200),
    (f"bearer {ADMIN}", "anyone", 200),
    (f"  Bearer   {ADMIN}  ", "acme", 200),
    (f"Bearer {ACME}", "acme", 200),
    (f"Bearer {ACME}", "ACME", 403),  # tenants compare exactly
    (f"Bearer {ACME}", "beta", 403),
    (f"Bearer {ACME}", None, 200),  # no tenant asked: the parameter check answers 400
    (f"Bearer {BOTH}", "beta", 200),
    (f"Bearer {BOTH}", "gamma", 403),
    ("Bearer \udcff", "acme", 401),  # a header byte that is not UTF-8 (aiohttp's surrogate)
])
def test_check(header: str | None, tenant: str | None, status: int) -> None:
    decision = ACCESS.check(header, tenant)
    assert decision.status == status
    if status != 200:
        assert decision.body()["error"]["code"] == {401: "unauthorized", 403: "forbidden"}[status]
        assert "token" in decision.body()["error"]["message"]


def test_with_no_token_configured_everything_is_refused() -> None:
    closed = StatsAccess([])
    assert not closed.configured
    assert closed.check(f"Bearer {ADMIN}", "acme").status == 401
    assert "MEMSTREAM_WEB__STATS_TOKENS" in closed.check(None, "acme").message


@pytest.mark.parametrize(("header", "token"), [
    ("Bearer abc", "abc"), ("BEARER abc", "abc"), ("Bearer  abc ", "abc"), ("Bearerabc", None),
    (None, None), ("Bearer", None),
])
def test_bearer(header: str | None, token: str | None) -> None:
    assert bearer(header) == token


def test_new_tokens_are_long_and_distinct() -> None:
    tokens = {new_token() for _ in range(100)}
    assert len(tokens) == 100 and min(len(t) for t in tokens) >= 43
    assert len(token_hash(next(iter(tokens)))) == 64
