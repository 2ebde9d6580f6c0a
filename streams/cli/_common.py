"""Helpers shared by the subcommands."""

from __future__ import annotations

import json
import sys
from typing import Any


def fail(message: str, code: int = 1) -> int:
    print(f"memstream: error: {message}", file=sys.stderr)
    return code


def print_json(doc: Any, *, pretty: bool = True) -> None:
    print(json.dumps(doc, ensure_ascii=False, indent=2 if pretty else None, default=str))
