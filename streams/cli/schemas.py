"""``memstream schemas export [--out DIR]``: write the JSON Schemas of every topic."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from streams.wire.schemas import all_schemas


def register(sub: Any) -> None:
    p = sub.add_parser("schemas", help="export the JSON Schemas of memstream's topics")
    p.add_argument("action", choices=["export"])
    p.add_argument("--out", default="schemas")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name, schema in all_schemas().items():
        (out / name).write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n")
        print(out / name)
    return 0
