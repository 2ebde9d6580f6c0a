"""``memstream history CONVERSATION_ID --tenant T [--last-n N] [--max-tokens M]``"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from streams.cli._common import fail, print_json
from streams.settings import get_settings
from streams.wire.records import TENANT_PATTERN
from streams.worker.runtime import Runtime


def register(sub: Any) -> None:
    p = sub.add_parser("history", help="print a conversation's model-ready Session window")
    p.add_argument("conversation_id")
    p.add_argument("--tenant", required=True)
    p.add_argument("--last-n", type=int, default=None, help="newest messages to consider")
    p.add_argument("--max-tokens", type=int, default=None,
                   help="token window (default MAX_TOKEN_WINDOW)")
    p.add_argument("--format", choices=["json", "text"], default="json")
    p.set_defaults(func=run)


def render_window(window: dict[str, Any]) -> str:
    lines = []
    for group in ("system", "messages", "tool"):
        for m in window[group]:
            who = m.get("name") or m["role"]
            lines.append(f"[{m.get('created_at', '')}] {who}: {m.get('content', '')}")
    lines.append(
        f"-- {len(window['messages'])} messages, {window['tokens']} tokens, "
        f"from {window['source']}{', truncated' if window['truncated'] else ''}"
    )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    import re

    if not re.fullmatch(TENANT_PATTERN, args.tenant):
        return fail(f"invalid tenant id {args.tenant!r}", 2)
    if args.last_n is not None and args.last_n < 1:
        return fail("--last-n must be at least 1", 2)
    if args.max_tokens is not None and args.max_tokens < 1:
        return fail("--max-tokens must be at least 1", 2)

    async def go() -> dict[str, Any]:
        rt = await Runtime(get_settings(), migrate=False).start()
        try:
            w = await rt.reader.window(
                args.tenant, args.conversation_id, last_n=args.last_n, max_tokens=args.max_tokens
            )
            return w.to_dict()
        finally:
            await rt.stop()

    try:
        window = asyncio.run(go())
    except (SQLAlchemyError, OSError) as exc:
        return fail(f"database unavailable: {exc}")
    if args.format == "text":
        print(render_window(window))
    else:
        print_json(window)
    return 0
