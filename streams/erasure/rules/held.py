"""Which memories a worker holds an erasure makes it let go of (pure).

Every worker learns of a finished erasure from its record alone (who: the
tenant, the target and its subject; for a memory, the cube and user it came
from), and drops only what that names: other tenants' scopes stay held.
"""

from __future__ import annotations

from streams.erasure.model import ErasureMark
from streams.memory.model import HeldScopes, cube_key


def held_scopes(mark: ErasureMark) -> HeldScopes:
    """What ``mark``'s erasure removed, as the caches hold it: a user's profile, the
    agent cubes (their memories of the user) and the user's rows; a memory's cube and
    the memory; for a tenant, or a conversation (the cubes its memories went to are
    not recorded), every scope of the tenant."""
    if mark.target == "user":
        return HeldScopes(mark.tenant_id, user_id=mark.subject)
    if mark.target == "memory" and mark.source is not None:
        key = cube_key(mark.tenant_id, mark.source.cube, mark.source.user_id)
        return HeldScopes(mark.tenant_id, cube=key.cube, owner=key.owner,
                          memory_ids=frozenset({mark.subject}))
    return HeldScopes(mark.tenant_id)
