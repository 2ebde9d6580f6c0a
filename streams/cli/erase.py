"""``memstream erase --tenant T (--user U | --conversation C | --memory ID |
--all-of-tenant) [--dry-run]``: forget a person, a conversation, one memory or a
whole tenant, in every store.

The request goes to ``memory.erasures`` (as any upstream would send it) and a
worker carries it out; the command waits for the receipt and prints it (counts
per store, no content). ``--dry-run`` says what would go. Repeating a request
with the same ``--id`` changes nothing and prints the same counts; an
interrupted erasure completes when its request is delivered again.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
import uuid
from typing import Any

from aiokafka.errors import KafkaError
from pydantic import ValidationError

from streams.adapters.kafka.clients import kafka_security
from streams.cli._common import fail, print_json
from streams.client import ERASE_TIMEOUT_S, MemoryClient, QueryTimeoutError
from streams.settings import get_settings
from streams.wire.erasure import ErasureReceipt
from streams.wire.records import TENANT_PATTERN


def register(sub: Any) -> None:
    p = sub.add_parser("erase", help="erase a user, a conversation, a memory or a tenant")
    p.add_argument("--tenant", required=True)
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--user", help="everything of this user in the tenant")
    what.add_argument("--conversation", help="one conversation, every speaker")
    what.add_argument("--memory", help="one long-term memory (the id a query reply gives)")
    what.add_argument("--all-of-tenant", action="store_true", help="everything of the tenant")
    p.add_argument("--provider", choices=["MEMOS", "MEM0", "MYSQL"],
                   help="with --memory: the provider holding it, when the id is ambiguous")
    p.add_argument("--dry-run", action="store_true", help="count what would go; change nothing")
    p.add_argument("--id", dest="erasure_id",
                   help="idempotency key (default: a new one, printed in the receipt)")
    p.add_argument("--reference", help="your reference (a ticket number), kept with the record")
    p.add_argument("--yes", action="store_true", help="confirm --all-of-tenant")
    p.add_argument("--timeout", type=float, default=ERASE_TIMEOUT_S,
                   help="seconds to wait for the receipt")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=run)


async def _erase(args: argparse.Namespace, target: str, erasure_id: str) -> ErasureReceipt:
    s = get_settings()
    async with MemoryClient(s.kafka.broker, erasures_topic=s.kafka.erasures_topic,
                            reply_topic=s.query.reply_topic,
                            security=kafka_security(s.kafka)) as client:
        task = asyncio.ensure_future(client.erase(
            tenant_id=args.tenant, target=target, user_id=args.user,  # type: ignore[arg-type]
            conversation_id=args.conversation, memory_id=args.memory, provider=args.provider,
            dry_run=args.dry_run, erasure_id=erasure_id, reference=args.reference,
            timeout_s=args.timeout))
        started = time.monotonic()
        while not task.done():
            await asyncio.wait([task], timeout=5.0)
            if not task.done() and not args.quiet:
                sys.stderr.write(f"erasure {erasure_id}: waiting for the receipt "
                                 f"({time.monotonic() - started:.0f} s)\n")
        return task.result()


def run(args: argparse.Namespace) -> int:
    if not re.fullmatch(TENANT_PATTERN, args.tenant):
        return fail(f"invalid tenant id {args.tenant!r}", 2)
    if args.provider and not args.memory:
        return fail("--provider goes with --memory", 2)
    if args.all_of_tenant and not args.dry_run and not args.yes:
        return fail(f"--all-of-tenant erases everything of tenant {args.tenant!r}: "
                    "add --yes (or try --dry-run first)", 2)
    target = ("user" if args.user is not None else "conversation"
              if args.conversation is not None else "memory" if args.memory is not None
              else "tenant")
    erasure_id = args.erasure_id or f"cli-{uuid.uuid4().hex}"
    try:
        receipt = asyncio.run(_erase(args, target, erasure_id))
    except ValidationError as exc:
        return fail("; ".join(e["msg"] for e in exc.errors()), 2)
    except QueryTimeoutError as exc:
        return fail(f"erasure {erasure_id}: {exc}: is a worker running? The request stays on "
                    "the topic and is carried out when a worker takes it; run the same "
                    "command with --id to wait for it again")
    except KafkaError as exc:
        return fail(f"kafka: {exc}")
    print_json(receipt.model_dump(mode="json"))
    return 0 if receipt.status in ("done", "dry_run") else 1
