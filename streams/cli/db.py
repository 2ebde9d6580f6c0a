"""``memstream db upgrade|current``"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from streams.adapters.db.engine import create_engine
from streams.adapters.db.migrate import current_revision, upgrade
from streams.cli._common import fail
from streams.settings import get_settings


def register(sub: Any) -> None:
    p = sub.add_parser("db", help="database schema migrations")
    p.add_argument("action", choices=["upgrade", "current"])
    p.add_argument("--revision", default="head")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
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
