"""Helpers shared by the subcommands."""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime
from typing import Any

from streams.wire.records import RFC3339_PATTERN

BAR_WIDTH = 30


def progress_bar(label: str, done: int, total: int, tail: str = "") -> None:
    """One line on stderr, redrawn in place: ``label [####....] done/total tail``."""
    frac = 1.0 if total == 0 else min(1.0, done / total)
    filled = int(BAR_WIDTH * frac)
    sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total}"
                     f"{' ' + tail if tail else ''}")
    sys.stderr.flush()


def fail(message: str, code: int = 1) -> int:
    print(f"memstream: error: {message}", file=sys.stderr)
    return code


def print_json(doc: Any, *, pretty: bool = True) -> None:
    print(json.dumps(doc, ensure_ascii=False, indent=2 if pretty else None, default=str))


def parse_since(text: str | None) -> datetime | None:
    """``--since``: an RFC 3339 date-time with an offset; ValueError otherwise."""
    if text is None:
        return None
    if not re.fullmatch(RFC3339_PATTERN, text):
        raise ValueError("--since must be an RFC 3339 date-time with an offset")
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
        when.astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValueError(f"--since {text!r} is not a time memstream can store") from None
    return when
