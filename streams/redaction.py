"""What must not leave memstream in error text: SQL, row contents, credentials.

Error text reaches dead-letter headers, reply warnings and logs. The database
driver's errors carry the statement and its parameters (SQLAlchemy appends
``[SQL: …]``, ``[parameters: …]`` — the parameters are message contents — and a
``(Background on this error at: …)`` link); connection errors can carry a URL
with its password; a provider's answer can echo a header. :func:`redacted`
cuts the first and masks the others; :class:`RedactingFilter` applies it to
every log record (message and traceback) on the handlers it is added to.
"""

from __future__ import annotations

import logging
import re
import traceback

_SQL_TAIL = re.compile(r"\s*\[(?:SQL|parameters|generated in)[: ].*", re.S)
_BACKGROUND = re.compile(r"\s*\(Background on this error at: [^)]*\)")
# scheme://user:password@host  ->  scheme://user:***@host (the last @ before the host)
_URL_CREDENTIALS = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^:/@\s]*):[^/\s]*@", re.I)
_AUTHORIZATION = re.compile(r"\b(Bearer|Token|Basic)\s+[A-Za-z0-9._~+/=-]+", re.I)
# password=x, "api_key": "x", sasl_password='a b', client_secret: x, access_token=x
_KEYED = re.compile(
    r"(?<![A-Za-z0-9])([\w-]*(?:password|passwd|secret|token|api[_-]?key)[\"']?)"
    r"(\s*[=:]\s*)(?:\"[^\"]*\"|'[^']*'|[^\s,;&}]+)", re.I)
# the quoted row value in MySQL's duplicate / syntax / conversion errors
_DRIVER_VALUE = re.compile(
    r"(Duplicate entry |near |Incorrect [a-z ]+ value: )'(?:[^'\\]|\\.)*'",
    re.I)
MASK = "***"


def redacted(text: str) -> str:
    """``text`` without SQL and parameters, with credentials masked."""
    text = _SQL_TAIL.sub("", text)
    text = _BACKGROUND.sub("", text)
    text = _URL_CREDENTIALS.sub(rf"\1:{MASK}@", text)
    text = _AUTHORIZATION.sub(rf"\1 {MASK}", text)
    text = _DRIVER_VALUE.sub(rf"\1'{MASK}'", text)
    return _KEYED.sub(rf"\1\2{MASK}", text)


def error_text(exc: BaseException) -> str:
    """``Class: message`` of an exception, redacted."""
    return redacted(f"{type(exc).__name__}: {exc}")


class RedactingFilter(logging.Filter):
    """Rewrites a record's message and traceback through :func:`redacted`."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redacted(message)
        if clean != message:
            record.msg, record.args = clean, ()  # () not None: formatters may iterate it
        if record.exc_info and record.exc_info[1] is not None:
            # another handler may have formatted it already: redact what it wrote
            raw = record.exc_text or "".join(traceback.format_exception(*record.exc_info))
            record.exc_text = redacted(raw).rstrip("\n")
        return True


def redact_logs(logger: logging.Logger | None = None) -> None:
    """Add a :class:`RedactingFilter` to every handler of ``logger`` (the root by default)."""
    target = logger or logging.getLogger()
    for handler in target.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
