"""Which runs share a cube's lock: the cube's identity and the lock's name."""

from __future__ import annotations

import pytest

from streams.adapters.db.cube_lock import NAME_PREFIX, lock_name
from streams.memory.model import USER_CUBE, CubeKey, agent_cube, cube_key


@pytest.mark.parametrize(
    ("a", "b", "shared"),
    [
        # the user's profile: one per user, whichever agent or conversation writes it
        (("t1", USER_CUBE, "u1"), ("t1", USER_CUBE, "u1"), True),
        (("t1", USER_CUBE, "u1"), ("t1", USER_CUBE, "u2"), False),
        # an agent's cube: one for all its users
        (("t1", agent_cube("a1"), "u1"), ("t1", agent_cube("a1"), "u2"), True),
        (("t1", agent_cube("a1"), "u1"), ("t1", agent_cube("a2"), "u1"), False),
        # tenants never share
        (("t1", USER_CUBE, "u1"), ("t2", USER_CUBE, "u1"), False),
        (("t1", agent_cube("a1"), "u1"), ("t2", agent_cube("a1"), "u1"), False),
        # a user's profile is not the agent's cube
        (("t1", USER_CUBE, "u1"), ("t1", agent_cube("a1"), "u1"), False),
    ],
)
def test_runs_share_a_cube_lock_exactly_when_they_write_the_same_cube(
    a: tuple[str, str, str], b: tuple[str, str, str], shared: bool
) -> None:
    ka, kb = cube_key(*a), cube_key(*b)
    assert (ka == kb) is shared
    assert (lock_name("db", ka) == lock_name("db", kb)) is shared


def test_cube_keys_name_the_owner_only_for_the_user_profile() -> None:
    assert cube_key("t1", USER_CUBE, "u1") == CubeKey("t1", USER_CUBE, "u1")
    assert cube_key("t1", agent_cube("a1"), "u1") == CubeKey("t1", "agent_a1", "")


@pytest.mark.parametrize(
    "key",
    [CubeKey("t1", USER_CUBE, "u1"), CubeKey("t" * 200, USER_CUBE, "u" * 300),
     CubeKey("租户", agent_cube("助手"), ""), CubeKey("t1", "user_profile\x1f", "")],
)
def test_lock_names_fit_mysql_and_separate_databases(key: CubeKey) -> None:
    name = lock_name("memstream", key)
    assert name.startswith(NAME_PREFIX) and len(name) <= 64 and name.isascii()
    assert name == lock_name("memstream", key)
    assert name != lock_name("memstream_other", key)  # one server, two deployments


@pytest.mark.parametrize(("a", "b"), [
    (CubeKey("t1", "a", "b"), CubeKey("t1", "a\x1fb", "")),
    (CubeKey("t1", "a\x1f", "b"), CubeKey("t1", "a", "\x1fb")),
    (CubeKey("t1/x", "a", ""), CubeKey("t1", "x/a", "")),
])
def test_no_spelling_makes_two_cubes_one(a: CubeKey, b: CubeKey) -> None:
    assert lock_name("db", a) != lock_name("db", b)
