"""``memstream query --tenant T --user U --agent A "message"``: ask for memory over Kafka."""

from __future__ import annotations

import argparse
import asyncio
import re
from typing import Any

from aiokafka.errors import KafkaError

from streams.adapters.kafka.clients import kafka_security
from streams.cli._common import fail, print_json
from streams.client import MemoryClient, QueryTimeoutError
from streams.settings import get_settings
from streams.wire.records import TENANT_PATTERN


def register(sub: Any) -> None:
    p = sub.add_parser("query", help="ask memstream for memory, as an agent would")
    p.add_argument("message")
    p.add_argument("--tenant", required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--agent", required=True)
    p.add_argument("--conversation", default=None,
                   help="include this conversation's Session window")
    p.add_argument("--context", default=None)
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--keyword-only", action="store_true", help="just_keyword_search")
    p.add_argument("--no-short-term", action="store_true")
    p.add_argument("--last-n", type=int, default=None)
    p.add_argument("--budget", type=int, default=None, help="long_memory_token_budget")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the reply")
    p.add_argument("--format", choices=["json", "text"], default="json")
    p.set_defaults(func=run)


def render_reply(reply: dict[str, Any]) -> str:
    out = []
    if reply.get("error"):
        out.append(f"error: {reply['error']['code']}: {reply['error']['message']}")
    for w in reply.get("warnings") or []:
        out.append(f"warning: {w['code']}: {w['message']}")
    if reply.get("user_profile"):
        out += ["# user_profile", reply["user_profile"]]
    if reply.get("agent_memory"):
        out += ["# agent_memory", reply["agent_memory"]]
    lt = reply.get("long_term") or {}
    if lt.get("skipped"):
        out.append(f"(long-term skipped: {lt['skipped']})")
    st = reply.get("short_term")
    if st:
        out.append(f"# short_term ({len(st['messages'])} messages, {st['tokens']} tokens)")
        for m in st["messages"]:
            out.append(f"{m.get('name') or m['role']}: {m.get('content', '')}")
    out.append(f"-- {len(reply.get('memories') or [])} memories, {reply.get('latency_ms')} ms")
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    if not re.fullmatch(TENANT_PATTERN, args.tenant):
        return fail(f"invalid tenant id {args.tenant!r}", 2)
    options: dict[str, Any] = {}
    if args.top_k is not None:
        options["top_k"] = args.top_k
    if args.keyword_only:
        options["just_keyword_search"] = True
    if args.no_short_term:
        options["include_short_term"] = False
    if args.last_n is not None:
        options["last_n"] = args.last_n
    if args.budget is not None:
        options["long_memory_token_budget"] = args.budget
    s = get_settings()

    async def go() -> dict[str, Any]:
        async with MemoryClient(s.kafka.broker, request_topic=s.kafka.queries_topic,
                                reply_topic=s.query.reply_topic, timeout_s=args.timeout,
                                security=kafka_security(s.kafka)) as client:
            reply = await client.query(tenant_id=args.tenant, user_id=args.user,
                                       agent_id=args.agent, message=args.message,
                                       conversation_id=args.conversation,
                                       context=args.context, **options)
            return reply.model_dump(mode="json")

    try:
        reply = asyncio.run(go())
    except ValueError as exc:
        return fail(str(exc), 2)
    except QueryTimeoutError as exc:
        return fail(f"{exc}: is a worker running?")
    except KafkaError as exc:
        return fail(f"kafka: {exc}")
    if args.format == "text":
        print(render_reply(reply))
    else:
        print_json(reply)
    return 1 if reply.get("error") else 0
