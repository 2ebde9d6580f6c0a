"""The ``memstream`` command line."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from streams import __version__
from streams.cli._common import fail
from streams.cli.env_check import UnknownSettingsError, check_environment
from streams.redaction import redact_logs

# each module defines ``register(subparsers)``; its parser sets ``func``
COMMANDS = [
    "streams.cli.worker",
    "streams.cli.topics",
    "streams.cli.db",
    "streams.cli.history",
    "streams.cli.produce",
    "streams.cli.schemas",
    "streams.cli.agent_config",
    "streams.cli.replay",
    "streams.cli.reprocess",
    "streams.cli.erase",
    "streams.cli.memories",
    "streams.cli.query",
    "streams.cli.demo",
    "streams.cli.config",
    "streams.cli.stats_token",
    "streams.cli.bench",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memstream",
        description="Kafka-native memory service for AI agents.",
    )
    parser.add_argument("--version", action="version", version=f"memstream {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug output")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    redact_logs()
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:  # a mistyped setting would otherwise be ignored without a word
        check_environment(os.environ)
    except UnknownSettingsError as exc:
        return fail(str(exc), 2)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (``| head``): stop without a traceback
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
