"""``memstream db upgrade|current|backfill``"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from streams.adapters.db.engine import create_engine
from streams.adapters.db.migrate import current_revision, upgrade
from streams.cli._common import fail, progress_bar
from streams.memory.providers.builtin.backfill import BATCH, BackfillProgress, backfill_features
from streams.settings import get_settings

PROGRESS_EVERY_S = 1.0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "db", help="database schema migrations",
        description=(
            "upgrade: migrate the schema (to --revision, default the newest); current: "
            "print the schema's revision; backfill: store what a worker needs to hold "
            "each memory (its features) for the built-in provider's memories written "
            "before this release stored them, in batches, beside running workers "
            "(docs/operations.md, upgrading)."))
    p.add_argument("action", choices=["upgrade", "current", "backfill"])
    p.add_argument("--revision", default="head", help="upgrade: the revision to reach")
    p.add_argument("--batch", type=int, default=BATCH,
                   help=f"backfill: memories per transaction (default {BATCH})")
    p.add_argument("--after", type=int, default=0,
                   help="backfill: start past this memory id (resume: the last id printed)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "backfill":
        if args.batch < 1 or args.after < 0:
            return fail("--batch must be at least 1 and --after at least 0")
        return _backfill(args.batch, args.after)

    async def go() -> str | None:
        engine = create_engine(get_settings().database)
        try:
            if args.action == "upgrade":
                await upgrade(engine, args.revision)
            return await current_revision(engine)
        finally:
            await engine.dispose()

    try:
        print(asyncio.run(go()) or "empty")
    except (SQLAlchemyError, OSError) as exc:
        return fail(f"database unavailable: {exc}")
    return 0


def _backfill(batch: int, after: int) -> int:
    shown = [0.0]

    def show(p: BackfillProgress) -> None:
        if time.monotonic() - shown[0] >= PROGRESS_EVERY_S or p.last_id >= p.max_id:
            shown[0] = time.monotonic()
            progress_bar("features", p.last_id, p.max_id,
                         f"ids; {p.checked} memories checked, {p.stored} stored")

    async def go() -> BackfillProgress:
        engine = create_engine(get_settings().database)
        try:
            return await backfill_features(engine, batch=batch, after=after, progress=show)
        finally:
            await engine.dispose()

    try:
        done = asyncio.run(go())
    except (SQLAlchemyError, OSError) as exc:
        sys.stderr.write("\n")
        return fail(f"database unavailable: {exc} (resume with --after, the last id shown)")
    sys.stderr.write("\n")
    print(f"{done.checked} valid memories checked up to id {done.last_id}: features stored "
          f"for {done.stored}, {done.newer} left with a newer release's")
    return 0
