"""``memstream reprocess --tenant T [--user U] [--since RFC3339] [--dry-run]``

Rebuilds a tenant's long-term memories from the durable history (after a change
of the judge, its model or its rules): each finished session is consolidated
again, the new memories are written, and only then are the memories those
sessions had produced retired (:mod:`streams.consolidation.reprocess`). A
progress bar goes to stderr, the report (JSON) to stdout.

Interrupted (Ctrl-C, a crash, a provider down), the same command resumes the
job where it stopped; a tenant has one unfinished job at a time, and
``--abandon`` gives it up. ``--dry-run`` prints the plan, how many memories held
now came from it, and what the current judge makes of the sessions, writing
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

from streams.adapters.db.migrate import SchemaNotCurrentError, require_current
from streams.adapters.kafka.agent_config_topic import read_all
from streams.cli._common import fail, parse_since, print_json, progress_bar
from streams.consolidation.reprocess import (
    JobConflict,
    Report,
    ReprocessBusy,
    ReprocessRequest,
)
from streams.memory.agent_configs import StaticAgentConfigs
from streams.memory.provider import ProviderError
from streams.memory.rules.routing import split_agent_config_key
from streams.settings import Settings, get_settings
from streams.wire.envelope import Outgoing
from streams.wire.records import MAX_ID_LEN, TENANT_PATTERN
from streams.worker.runtime import Runtime
from streams.worker.wiring import Wiring


def register(sub: Any) -> None:
    p = sub.add_parser("reprocess", help="rebuild long-term memories from the stored history")
    p.add_argument("--tenant", required=True)
    p.add_argument("--user", help="only the sessions this user speaks in (whole sessions: "
                   "what other speakers said in them is rebuilt too)")
    p.add_argument("--since", help="only sessions with a message at or after this RFC 3339 time")
    p.add_argument("--dry-run", action="store_true",
                   help="say what would be rebuilt and what is held from it; write nothing")
    p.add_argument("--no-judge", action="store_true",
                   help="with --dry-run: the plan only, without asking the judge")
    p.add_argument("--abandon", action="store_true",
                   help="give up the tenant's unfinished job (what it wrote stays)")
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


def say(args: argparse.Namespace, text: str) -> None:
    if not args.quiet:
        print(text, file=sys.stderr)


async def reprocess(args: argparse.Namespace, req: ReprocessRequest) -> dict[str, Any]:
    s = get_settings()
    rt = await Runtime(s, migrate=False).start()
    try:
        await require_current(rt.engine)
        # a memory erased on request is not rebuilt from the messages it came from
        await rt.erasures.refresh()
        reprocessor = Wiring(s, rt, publisher=NothingToPublish(),
                             agent_configs=await agent_configs(s),
                             erasures=rt.erasures).reprocessor()
        if args.abandon:
            gone = await reprocessor.abandon(req.tenant_id)
            return {"abandoned": gone.job_id if gone else None}
        if args.dry_run:
            return asdict(await reprocessor.preview(req, judge=not args.no_judge))
        job, resumed, plan = await reprocessor.start(req)
        if job is None:
            say(args, "nothing to reprocess")
            busy = plan.busy if plan else []
            return asdict(Report(None, False, 0, 0, busy))
        if resumed:
            say(args, f"resuming job {job.job_id}")
        if plan and plan.busy:
            say(args, f"left out (a live run is unfinished): {', '.join(plan.busy)}")

        def show(done: int, total: int) -> None:
            if not args.quiet:
                progress_bar("reprocess", done, total, "sessions")

        try:
            report = await reprocessor.run(job, show)
        finally:
            if not args.quiet:
                sys.stderr.write("\n")
        report.resumed = resumed
        report.busy_conversations = plan.busy if plan else []
        return asdict(report)
    finally:
        await rt.stop()


def run(args: argparse.Namespace) -> int:
    if not re.fullmatch(TENANT_PATTERN, args.tenant):
        return fail(f"invalid tenant id {args.tenant!r}", 2)
    if args.user is not None and not 0 < len(args.user) <= MAX_ID_LEN:
        return fail(f"--user must be 1 to {MAX_ID_LEN} characters", 2)
    if args.no_judge and not args.dry_run:
        return fail("--no-judge goes with --dry-run", 2)
    try:
        since = parse_since(args.since)
    except ValueError as exc:
        return fail(str(exc), 2)
    req = ReprocessRequest(args.tenant, args.user, since)
    resume = "; run the same command again to resume"
    try:
        out = asyncio.run(reprocess(args, req))
    except KeyboardInterrupt:
        fail(f"interrupted{resume}")
        return 130
    except JobConflict as exc:
        return fail(f"{exc}: run `memstream reprocess {exc.job.describe()}` to finish it, "
                    f"or `memstream reprocess --tenant {req.tenant_id} --abandon`")
    except ReprocessBusy as exc:
        return fail(str(exc))
    except SchemaNotCurrentError as exc:
        return fail(str(exc))
    except (KafkaError, TimeoutError) as exc:
        return fail(f"kafka (agent configurations): {exc}")
    except (SQLAlchemyError, OSError) as exc:
        return fail(f"database unavailable: {exc}{resume}")
    except ProviderError as exc:
        return fail(f"provider: {exc}{resume}")
    print_json(out)
    return 0
