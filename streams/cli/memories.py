"""``memstream memories --tenant T --user U --agent A [--all] [--kind fact|episode]``

Lists the long-term memories the built-in provider holds for a user and an
agent (the ``user_profile`` and ``agent_{agentId}`` cubes), oldest first. By
default only valid memories; ``--all`` adds the superseded ones with
``valid_to`` and ``superseded_by``, the audit trail of what replaced what.
MemOS and Mem0 keep their memories themselves: ask them, or ``memstream query``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from streams.cli._common import fail, print_json
from streams.memory.model import StoredMemory, readable_cubes
from streams.memory.provider import ProviderError, Scope
from streams.memory.providers.builtin.provider import BuiltinProvider
from streams.settings import get_settings
from streams.wire.records import TENANT_PATTERN
from streams.worker.runtime import Runtime


def register(sub: Any) -> None:
    p = sub.add_parser("memories", help="list the built-in provider's memories of a user/agent")
    p.add_argument("--tenant", required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--agent", required=True)
    p.add_argument("--all", action="store_true", help="include superseded memories")
    p.add_argument("--kind", choices=["fact", "episode"], help="only this kind")
    p.add_argument("--format", choices=["json", "text"], default="text")
    p.set_defaults(func=run)


def as_doc(m: StoredMemory) -> dict[str, Any]:
    """A memory as listed; ``masked``: the kinds of sensitive content masked in it."""
    return {
        "id": m.id, "cube": m.cube, "kind": m.kind, "type": m.type, "scope": m.scope,
        "content": m.content, "importance": m.importance,
        "event_time": m.event_time.isoformat() if m.event_time else None,
        "source_event_ids": list(m.source_event_ids),
        "valid_to": m.metadata.get("valid_to"), "superseded_by": m.metadata.get("superseded_by"),
        "masked": masked if isinstance(masked := m.metadata.get("masked"), list) else [],
    }


def render_memories(docs: list[dict[str, Any]]) -> str:
    lines = []
    for d in docs:
        when = (d["event_time"] or "")[:16].replace("T", " ")
        mark = "" if d["valid_to"] is None else f"  (superseded by {d['superseded_by']})"
        lines.append(f"[{d['cube']}] {d['kind']}/{d['type']} {when}  {d['content']}{mark}")
    lines.append(f"-- {len(docs)} memories")
    return "\n".join(lines)


async def collect(args: argparse.Namespace) -> list[dict[str, Any]]:
    rt = await Runtime(get_settings(), migrate=False).start()
    try:
        provider = BuiltinProvider(rt.engine)
        scope = Scope(args.tenant, args.user, args.agent)
        docs = []
        for cube in readable_cubes(args.agent):
            for m in await provider.history(scope, cube):
                if (args.all or m.metadata.get("valid_to") is None) and (
                        args.kind is None or m.kind == args.kind):
                    docs.append(as_doc(m))
        return docs
    finally:
        await rt.stop()


def run(args: argparse.Namespace) -> int:
    if not re.fullmatch(TENANT_PATTERN, args.tenant):
        return fail(f"invalid tenant id {args.tenant!r}", 2)
    try:
        docs = asyncio.run(collect(args))
    except (SQLAlchemyError, OSError, ProviderError) as exc:
        return fail(f"database unavailable: {exc}")
    if args.format == "text":
        print(render_memories(docs))
    else:
        print_json(docs)
    return 0
