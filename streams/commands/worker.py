"""``memstream worker``: create topics, migrate the schema, run the Faust worker."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import pkgutil
import sys
from typing import Any

from streams.admin import TopicLayoutError, ensure_topics
from streams.commands._common import fail
from streams.db.engine import create_engine
from streams.db.migrate import upgrade
from streams.heap import tune_gc
from streams.settings import get_settings


def register(sub: Any) -> None:
    p = sub.add_parser("worker", help="run a memstream worker (add workers to scale out)")
    p.add_argument("--no-create-topics", action="store_true", help="do not create missing topics")
    p.add_argument("--no-migrate", action="store_true", help="do not upgrade the database schema")
    p.set_defaults(func=run)


async def _prepare(create_topics: bool, migrate: bool) -> None:
    settings = get_settings()
    if create_topics:
        await ensure_topics(settings.kafka)
    if migrate:
        engine = create_engine(settings.database)
        try:
            await upgrade(engine)
        finally:
            await engine.dispose()


def run(args: argparse.Namespace) -> int:
    settings = get_settings()
    try:
        asyncio.run(_prepare(not args.no_create_topics, not args.no_migrate))
    except TopicLayoutError as exc:
        return fail(str(exc))
    from streams.app import app

    # import every agent module now, so a broken one stops the start instead
    # of leaving a worker that silently consumes nothing
    agents = importlib.import_module("agents")
    for mod in pkgutil.iter_modules(agents.__path__, "agents."):
        importlib.import_module(mod.name)

    sys.argv = [
        "memstream", "worker",
        "--loglevel", settings.log_level,
        "--web-host", settings.web.host,
        "--web-port", str(settings.web.port),
    ]
    tune_gc()
    app.main()
    return 0
