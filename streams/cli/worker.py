"""``memstream worker``: migrate the schema (or, with ``--no-migrate``, check
it), create topics, run the Faust worker. This command is the one place that
decides whether the worker migrates: its runtime never does."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import pkgutil
import sys
import time
from functools import partial
from typing import Any

from streams.adapters.db.engine import create_engine
from streams.adapters.db.errors import is_transient
from streams.adapters.db.migrate import SchemaNotCurrentError, require_current, upgrade
from streams.adapters.kafka.admin import TopicLayoutError, ensure_topics
from streams.backoff import retry_forever
from streams.cli._common import fail
from streams.settings import get_settings
from streams.worker.gc_tuning import time_collections, tune_gc
from streams.worker.loop_busy import install as install_timed_loops


def register(sub: Any) -> None:
    p = sub.add_parser("worker", help="run a memstream worker (add workers to scale out)")
    p.add_argument("--no-create-topics", action="store_true", help="do not create missing topics")
    p.add_argument("--no-migrate", action="store_true",
                   help="do not upgrade the database schema; refuse to start unless it is current")
    p.set_defaults(func=run)


DATABASE_WAIT_S = 120.0
"""How long a starting worker waits for an unreachable database (restarting, or
its pod not ready yet) before it gives up with the error."""


async def _prepare(create_topics: bool, migrate: bool) -> None:
    settings = get_settings()
    # the schema first: a worker refused for its schema has created nothing
    engine = create_engine(settings.database)
    started = time.monotonic()

    def give_up(exc: Exception) -> bool:  # only what waiting can heal is waited out
        return not is_transient(exc) or time.monotonic() - started > DATABASE_WAIT_S

    try:
        await retry_forever(partial(upgrade if migrate else require_current, engine),
                            what="database", initial_s=0.5, max_s=5.0, give_up=give_up)
    finally:
        await engine.dispose()
    if create_topics:
        await ensure_topics(settings.kafka)


def run(args: argparse.Namespace) -> int:
    settings = get_settings()
    # before the app is imported (it makes its loop then): its loop's busy share is
    # measured (memstream_event_loop_busy_share)
    install_timed_loops()
    try:
        asyncio.run(_prepare(not args.no_create_topics, not args.no_migrate))
    except (TopicLayoutError, SchemaNotCurrentError) as exc:
        return fail(str(exc))
    from streams.worker.app import app

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
    time_collections()
    app.main()
    return 0
