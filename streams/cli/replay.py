"""``memstream replay --from memory.dlq [--tenant T] [--since RFC3339] [--limit N]``

Re-drives dead-lettered records to the topic they failed on (see
:mod:`streams.adapters.kafka.replay`), with a progress bar on stderr and a JSON report on
stdout. Running it again continues after what it already re-drove;
``--restart`` starts over.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from dataclasses import asdict
from typing import Any

from aiokafka.errors import KafkaError

from streams.adapters.kafka.replay import (
    DeadLetterReplayer,
    ReplayFilter,
    ReplayReport,
    replay_group,
)
from streams.cli._common import fail, parse_since, print_json, progress_bar
from streams.settings import get_settings
from streams.wire.records import TENANT_PATTERN


def register(sub: Any) -> None:
    p = sub.add_parser("replay", help="re-drive dead-lettered records to their source topic")
    p.add_argument("--from", dest="source", default=None,
                   help="the dead-letter topic (default: the configured one, memory.dlq)")
    p.add_argument("--tenant", help="only this tenant's records")
    p.add_argument("--since", help="only records that failed at or after this RFC 3339 time")
    p.add_argument("--limit", type=int, help="re-drive at most this many records")
    p.add_argument("--group", help="replay consumer group (default: <app id>-replay[.<tenant>])")
    p.add_argument("--restart", action="store_true",
                   help="start from the beginning, ignoring what was re-driven before")
    p.add_argument("--dry-run", action="store_true",
                   help="count only: produce nothing, remember nothing")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def replay_progress(done: int, total: int, report: ReplayReport) -> None:
    progress_bar("replay", done, total, f"read, {report.redriven} re-driven")


def run(args: argparse.Namespace) -> int:
    s = get_settings()
    if args.tenant is not None and not re.fullmatch(TENANT_PATTERN, args.tenant):
        return fail(f"invalid tenant id {args.tenant!r}", 2)
    try:
        since = parse_since(args.since)
    except ValueError as exc:
        return fail(str(exc), 2)
    if args.limit is not None and args.limit < 1:
        return fail("--limit must be at least 1", 2)
    replayer = DeadLetterReplayer(
        s.kafka, args.source or s.kafka.dlq_topic,
        args.group or replay_group(s.kafka.app_id, args.tenant),
        ReplayFilter(tenant_id=args.tenant, since=since, limit=args.limit),
        restart=args.restart, dry_run=args.dry_run,
        progress=None if args.quiet else replay_progress)
    try:
        report = asyncio.run(replayer.run())
    except KafkaError as exc:
        return fail(f"kafka: {exc}")
    finally:
        if not args.quiet:
            sys.stderr.write("\n")
    print_json(asdict(report))
    return 0
