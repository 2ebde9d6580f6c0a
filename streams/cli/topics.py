"""``memstream topics create``: create memstream's topics with the configured partitions."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from streams.adapters.kafka.admin import TopicLayoutError, ensure_topics, topic_specs
from streams.cli._common import fail
from streams.settings import get_settings


def register(sub: Any) -> None:
    p = sub.add_parser("topics", help="create or list memstream's topics")
    p.add_argument("action", choices=["create", "list"])
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    k = get_settings().kafka
    if args.action == "list":
        for s in topic_specs(k):
            cfg = ",".join(f"{a}={b}" for a, b in s.config.items())
            print(f"{s.name}\t{s.partitions}\t{cfg}")
        return 0
    try:
        created = asyncio.run(ensure_topics(k))
    except TopicLayoutError as exc:
        return fail(str(exc))
    print("created: " + (", ".join(created) if created else "nothing (all exist)"))
    return 0
