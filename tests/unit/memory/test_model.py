"""Which ids name a built-in memory: only those memstream writes."""

from __future__ import annotations

import pytest

from streams.memory.model import USER_CUBE, HeldScopes, decimal_id


@pytest.mark.parametrize(("value", "number"), [
    ("1", 1), ("1234", 1234), (42, 42),
    ("01", None), ("0", None), ("²", None), ("١", None), ("-1", None), ("1 ", None),
    ("", None), ("99999999999999999999", None), ("abc", None),
])
def test_only_ids_memstream_writes_name_a_builtin_memory(value: object,
                                                         number: int | None) -> None:
    assert decimal_id(value) == number


ERASED_USER = HeldScopes("t1", user_id="u1")
ONE_MEMORY = HeldScopes("t1", cube=USER_CUBE, owner="u1", memory_ids=frozenset({"42"}))
AGENT_CUBE = HeldScopes("t1", cube="agent_a1", owner="")


@pytest.mark.parametrize(("held", "scope", "covered"), [
    (HeldScopes("t1"), ("t1", USER_CUBE, "u9"), True),
    (HeldScopes("t1"), ("t2", USER_CUBE, "u9"), False),  # another tenant's
    (ERASED_USER, ("t1", USER_CUBE, "u1"), True),
    (ERASED_USER, ("t1", "agent_a1", ""), True),  # an agent cube holds every user's
    (ERASED_USER, ("t1", USER_CUBE, "u2"), False),  # another user's profile
    (ERASED_USER, ("t2", USER_CUBE, "u1"), False),  # the same user id elsewhere
    (ONE_MEMORY, ("t1", USER_CUBE, "u1"), True),
    (ONE_MEMORY, ("t1", "agent_a1", ""), False),
    (ONE_MEMORY, ("t1", USER_CUBE, "u2"), False),
    (AGENT_CUBE, ("t1", "agent_a1", ""), True),
    (AGENT_CUBE, ("t1", "agent_a2", ""), False),
])
def test_which_scopes_a_drop_covers(held: HeldScopes, scope: tuple[str, str, str],
                                    covered: bool) -> None:
    assert held.covers_scope(*scope) is covered


@pytest.mark.parametrize(("held", "row", "covered"), [
    (HeldScopes("t1"), ("t1", "agent_a1", "u2", "7"), True),
    (HeldScopes("t1"), ("t2", "agent_a1", "u2", "7"), False),
    (ERASED_USER, ("t1", "agent_a1", "u1", "7"), True),  # the user's, in an agent cube
    (ERASED_USER, ("t1", "agent_a1", "u2", "7"), False),  # another user's there
    (ONE_MEMORY, ("t1", USER_CUBE, "u1", "42"), True),
    (ONE_MEMORY, ("t1", USER_CUBE, "u1", "43"), False),  # only the memory named
    (ONE_MEMORY, ("t2", USER_CUBE, "u1", "42"), False),
    (AGENT_CUBE, ("t1", "agent_a1", "u5", "9"), True),
    (AGENT_CUBE, ("t1", USER_CUBE, "u5", "9"), False),
    (HeldScopes("t1", cube=USER_CUBE, owner="u1"), ("t1", USER_CUBE, "u2", "9"), False),
])
def test_which_rows_a_drop_covers(held: HeldScopes, row: tuple[str, str, str, str],
                                  covered: bool) -> None:
    assert held.covers_row(*row) is covered
