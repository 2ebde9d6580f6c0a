"""The Redis keys of a tenant's conversations, found by a literal pattern."""

from __future__ import annotations

import pytest

from streams.adapters.redis.conversation_cache import ConversationCache


@pytest.mark.parametrize(("prefix", "tenant", "pattern"), [
    ("ms", "t1", "ms:{t1:*"),
    ("a*b", "t.1", "a\\*b:{t.1:*"),  # a prefix with glob characters matches itself only
    ("x[1]", "t-1", "x\\[1\\]:{t-1:*"),
])
def test_the_scan_pattern_of_a_tenant_is_literal(prefix: str, tenant: str, pattern: str) -> None:
    assert ConversationCache(None, prefix=prefix).tenant_pattern(tenant) == pattern
