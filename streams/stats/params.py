"""Query parameters of the stats API: declared per endpoint, parsed strictly.

Every endpoint lists the parameters it takes (:class:`Param`); :func:`parse`
turns the raw query string into typed values or raises :class:`BadRequest`,
which the web layer answers with a 4xx JSON body::

    {"error": {"code": "invalid_parameter", "parameter": "from",
               "message": "from: not an ISO 8601 time: 'yesterday'"}}

Unknown, repeated, missing and malformed parameters are all errors, so a
misspelt name (``buckets=hour``) is reported instead of silently ignored.
Times are ISO 8601 / RFC 3339 (``2026-11-30T08:00:00Z``, with or without
fractions and offsets, or a bare date meaning midnight UTC); a time without an
offset is UTC. They come back as naive UTC datetimes, as the database stores
them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from streams.clock import naive_utc

ParamKind = Literal["string", "integer", "datetime"]
Query = Mapping[str, Sequence[str]]

TENANT_MAX_CHARS = 64  # the width of every tenant_id column
ID_MAX_CHARS = 255
MAX_OFFSET = 100_000
EARLIEST = datetime(1970, 1, 1)
_OFFSET_AFTER_SPACE = re.compile(r"^(.*T.*\d) (\d{2}:?\d{2})$")


class BadRequest(Exception):
    """A parameter is missing, malformed or out of range."""

    def __init__(self, code: str, message: str, parameter: str | None = None,
                 status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.parameter = parameter
        self.status = status

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.parameter is not None:
            error["parameter"] = self.parameter
        return {"error": error}


@dataclass(frozen=True)
class Param:
    """One query parameter an endpoint accepts (mirrored in docs/stats-api.yaml)."""

    name: str
    kind: ParamKind = "string"
    required: bool = False
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    max_length: int | None = None
    default: str | int | None = None


def tenant_param() -> Param:
    return Param("tenant", required=True, max_length=TENANT_MAX_CHARS)


def limit_param(default: int, maximum: int) -> Param:
    return Param("limit", "integer", minimum=1, maximum=maximum, default=min(default, maximum))


def offset_param() -> Param:
    return Param("offset", "integer", minimum=0, maximum=MAX_OFFSET, default=0)


def parse_time(raw: str, name: str) -> datetime:
    """An ISO 8601 time as naive UTC; ``BadRequest`` when it is none."""
    text = raw.strip()
    # an unencoded "+" in a query string arrives as a space
    if m := _OFFSET_AFTER_SPACE.match(text):
        text = f"{m.group(1)}+{m.group(2)}"
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise BadRequest("invalid_parameter", f"{name}: not an ISO 8601 time: {raw!r}",
                         name) from None
    try:
        value = naive_utc(value)
    except OverflowError:  # 9999-12-31T23:59:59-01:00 is past the last UTC time
        raise BadRequest("invalid_parameter", f"{name}: not a time in UTC: {raw!r}",
                         name) from None
    if value < EARLIEST:
        raise BadRequest("invalid_parameter", f"{name}: times before 1970 are not supported",
                         name)
    return value


def _convert(param: Param, raw: str) -> str | int | datetime:
    name = param.name
    if param.kind == "datetime":
        return parse_time(raw, name)
    if param.kind == "integer":
        text = raw.strip()
        if not re.fullmatch(r"[+-]?\d{1,12}", text):
            raise BadRequest("invalid_parameter", f"{name}: not an integer: {raw!r}", name)
        number = int(text)
        if param.minimum is not None and number < param.minimum:
            raise BadRequest("out_of_range", f"{name}: must be at least {param.minimum}", name)
        if param.maximum is not None and number > param.maximum:
            raise BadRequest("out_of_range", f"{name}: must be at most {param.maximum}", name)
        return number
    if param.choices and raw not in param.choices:
        raise BadRequest("invalid_parameter",
                         f"{name}: must be one of {', '.join(param.choices)}; got {raw!r}", name)
    if raw == "" or raw.strip() != raw:
        raise BadRequest("invalid_parameter", f"{name}: must not be empty or padded", name)
    if param.max_length is not None and len(raw) > param.max_length:
        raise BadRequest("invalid_parameter",
                         f"{name}: longer than {param.max_length} characters", name)
    if any(ord(c) < 32 for c in raw):
        raise BadRequest("invalid_parameter", f"{name}: contains control characters", name)
    return raw


@dataclass(frozen=True)
class Values:
    """Parsed parameters; absent optional ones hold their default (or None)."""

    values: Mapping[str, str | int | datetime | None]

    def text(self, name: str) -> str:
        value = self.values[name]
        assert isinstance(value, str), name
        return value

    def optional_text(self, name: str) -> str | None:
        value = self.values.get(name)
        assert value is None or isinstance(value, str), name
        return value

    def integer(self, name: str) -> int:
        value = self.values[name]
        assert isinstance(value, int), name
        return value

    def time(self, name: str) -> datetime:
        value = self.values[name]
        assert isinstance(value, datetime), name
        return value


def parse(query: Query, params: Sequence[Param]) -> Values:
    """Check ``query`` against ``params``; raise :class:`BadRequest` on the first problem."""
    known = {p.name: p for p in params}
    for name in query:
        if name not in known:
            accepted = ", ".join(known) or "none"
            raise BadRequest("unknown_parameter",
                             f"unknown parameter {name!r}; accepted: {accepted}", name)
    out: dict[str, str | int | datetime | None] = {}
    for p in params:
        raw = query.get(p.name)
        if not raw:
            if p.required:
                raise BadRequest("missing_parameter", f"{p.name} is required", p.name)
            out[p.name] = p.default
            continue
        if len(raw) > 1:
            raise BadRequest("repeated_parameter", f"{p.name} is given more than once", p.name)
        out[p.name] = _convert(p, raw[0])
    return Values(out)
