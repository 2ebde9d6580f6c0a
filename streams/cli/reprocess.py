"""``memstream reprocess --tenant T [--user U] [--since RFC3339] [--dry-run]``

Rebuilds a tenant's long-term memories from the durable history (after a change
of the judge, its model or its rules): each finished session is consolidated
again, the new memories are written, and only then are the memories those
sessions had produced retired (:mod:`streams.consolidation.reprocess`). A
progress bar goes to stderr, the report (JSON) to stdout.

Interrupted (Ctrl-C, a crash, a provider down), the same command resumes the
job where it stopped. ``--dry-run`` prints the plan, how many memories held now
it would replace, and what the current judge makes of the sessions, writing
nothing. Agent configurations (provider routing, per-agent models) are read
from the agent-config topic, as the worker reads them.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from aiokafka.errors import KafkaError
from sqlalchemy.exc import SQLAlchemyError

from streams.adapters.kafka.agent_config_topic import read_all
from streams.adapters.kafka.publish import Outgoing
from streams.cli._common import fail, parse_since, print_json, progress_bar
from streams.consolidation.reprocess import ReprocessRequest
from streams.memory.agent_configs import StaticAgentConfigs
from streams.memory.provider import ProviderError
from streams.memory.rules.routing import split_agent_config_key
from streams.settings import Settings, get_settings
from streams.wire.records import TENANT_PATTERN
from streams.worker.runtime import Runtime
from streams.worker.wiring import Wiring


def register(sub: Any) -> None:
    p = sub.add_parser("reprocess", help="rebuild long-term memories from the stored history")
    p.add_argument("--tenant", required=True)
    p.add_argument("--user", help="only the sessions this user speaks in")
    p.add_argument("--since", help="only sessions with a message at or after this RFC 3339 time")
    p.add_argument("--dry-run", action="store_true",
                   help="say what would be rebuilt and replaced; write nothing")
    p.add_argument("--no-judge", action="store_true",
                   help="with --dry-run: the plan only, without asking the judge")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


class NothingToPublish:
    """Rebuilding publishes no record; a call would be a wiring mistake."""

    async def publish(self, records: Sequence[Outgoing]) -> None:
        raise RuntimeError("memstream reprocess publishes no records")


async def agent_configs(s: Settings) -> StaticAgentConfigs:
    docs = {}
    for key, value in (await read_all(s.kafka)).items():
        if value is not None:
            docs[split_agent_config_key(key)] = value
    return StaticAgentConfigs(docs)


async def reprocess(args: argparse.Namespace, req: ReprocessRequest) -> dict[str, Any]:
    s = get_settings()
    configs = await agent_configs(s)
    rt = await Runtime(s, migrate=False).start()
    try:
        reprocessor = Wiring(s, rt, publisher=NothingToPublish(),
                             agent_configs=configs).reprocessor()
        if args.dry_run:
            return asdict(await reprocessor.preview(req, judge=not args.no_judge))
        job, resumed = await reprocessor.start(req)
        if resumed and not args.quiet:
            print(f"resuming job {job.job_id}", file=sys.stderr)

        def show(done: int, total: int) -> None:
            if not args.quiet:
                progress_bar("reprocess", done, total, "sessions")

        try:
            report = await reprocessor.run(job, show)
        finally:
            if not args.quiet:
                sys.stderr.write("\n")
        report.resumed = resumed
        return asdict(report)
    finally:
        await rt.stop()


def run(args: argparse.Namespace) -> int:
    if not re.match(TENANT_PATTERN, args.tenant):
        return fail(f"invalid tenant id {args.tenant!r}", 2)
    if args.user is not None and not args.user:
        return fail("--user is empty", 2)
    if args.no_judge and not args.dry_run:
        return fail("--no-judge goes with --dry-run", 2)
    try:
        since = parse_since(args.since)
    except ValueError as exc:
        return fail(str(exc), 2)
    req = ReprocessRequest(args.tenant, args.user, since)
    try:
        out = asyncio.run(reprocess(args, req))
    except (KafkaError, TimeoutError) as exc:
        return fail(f"kafka (agent configurations): {exc}")
    except (SQLAlchemyError, OSError) as exc:
        return fail(f"database unavailable: {exc}; run the same command again to resume")
    except ProviderError as exc:
        return fail(f"provider: {exc}; run the same command again to resume")
    print_json(out)
    return 0
