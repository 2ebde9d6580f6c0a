"""``memstream produce FILE``: publish chat events (JSON lines) keyed by conversation."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from aiokafka.errors import KafkaError

from streams.adapters.kafka.clients import publish_events
from streams.cli._common import fail
from streams.settings import get_settings


def register(sub: Any) -> None:
    p = sub.add_parser("produce", help="publish chat events from a JSON-lines file ('-' for stdin)")
    p.add_argument("file")
    p.add_argument("--topic", default=None, help="default: the chat topic")
    p.set_defaults(func=run)


def read_events(path: str) -> list[dict[str, Any]]:
    stream = sys.stdin if path == "-" else open(path, encoding="utf-8")  # noqa: SIM115
    with stream:
        out = []
        for n, line in enumerate(stream, 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except ValueError as exc:
                    raise ValueError(f"{path}:{n}: not JSON: {exc}") from exc
        return out


def run(args: argparse.Namespace) -> int:
    try:
        events = read_events(args.file)
    except (OSError, ValueError) as exc:
        return fail(str(exc), 2)
    try:
        n = asyncio.run(publish_events(get_settings().kafka, events, args.topic))
    except KafkaError as exc:
        return fail(f"kafka: {exc}")
    print(f"published {n} events")
    return 0
