"""``memstream db upgrade|current|backfill``"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from streams.adapters.db.engine import create_engine
from streams.adapters.db.migrate import (
    SchemaNotCurrentError,
    current_revision,
    require_current,
    upgrade,
)
from streams.cli._common import fail, progress_bar
from streams.memory.providers.builtin.backfill import BATCH, BackfillProgress, backfill_features
from streams.settings import get_settings

PROGRESS_EVERY_S = 1.0
MAX_BATCH = 10_000


def register(sub: Any) -> None:
    p = sub.add_parser(
        "db", help="database schema migrations",
        description=(
            "upgrade: migrate the schema (to --revision, default the newest); current: "
            "print the schema's revision; backfill: store what a worker needs to hold "
            "each memory (its features) for the built-in provider's memories written "
            "before this release stored them, in batches, beside running workers; run it "
            "with the workers' image once every worker runs this release "
            "(docs/operations.md, schema upgrades)."))
    p.add_argument("action", choices=["upgrade", "current", "backfill"])
    p.add_argument("--revision", default="head", help="upgrade: the revision to reach")
    p.add_argument("--batch", type=int, default=BATCH,
                   help=f"backfill: memories per transaction, 1 to {MAX_BATCH} (default {BATCH})")
    p.add_argument("--after", type=int, default=0,
                   help="backfill: start past this memory id (resume: the last id printed)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "backfill":
        if not 1 <= args.batch <= MAX_BATCH or args.after < 0:
            return fail(f"--batch must be 1 to {MAX_BATCH} and --after at least 0")
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

    def show(p: BackfillProgress, *, last: bool = False) -> None:
        if last or time.monotonic() - shown[0] >= PROGRESS_EVERY_S:
            shown[0] = time.monotonic()
            progress_bar("features", p.last_id, p.max_id,
                         f"ids; {p.checked} memories checked, {p.stored} stored")

    async def go() -> BackfillProgress:
        engine = create_engine(get_settings().database)
        try:
            await require_current(engine)
            return await backfill_features(engine, batch=batch, after=after, progress=show)
        finally:
            await engine.dispose()

    try:
        done = asyncio.run(go())
    except SchemaNotCurrentError as exc:
        return fail(str(exc))
    except (SQLAlchemyError, OSError) as exc:
        sys.stderr.write("\n")
        return fail(f"database unavailable: {exc} (resume with --after, the last id shown)")
    show(done, last=True)
    sys.stderr.write("\n")
    print(f"{done.checked} valid memories checked up to id {done.last_id}: features stored "
          f"for {done.stored}, {done.left} left as they were (a newer release's, or "
          f"written under a newer Python's Unicode version)")
    return 0
