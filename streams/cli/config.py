"""``memstream config show|docs``"""

from __future__ import annotations

import argparse
import json
from typing import Any

from streams.cli.config_docs import render
from streams.settings import get_settings


def register(sub: Any) -> None:
    p = sub.add_parser("config", help="show the effective configuration or render its docs")
    p.add_argument("action", choices=["show", "docs"])
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "docs":
        print(render(), end="")
        return 0
    print(json.dumps(get_settings().model_dump(mode="json"), indent=2))
    return 0
