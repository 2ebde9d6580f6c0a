"""What must not leave memstream in error text: table-driven."""

from __future__ import annotations

import contextlib
import io
import logging

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import IntegrityError

from streams.redaction import RedactingFilter, error_text, redacted


@pytest.mark.parametrize(("raw", "kept", "gone"), [
    ('(pymysql.err.IntegrityError) (1062, "Duplicate entry")\n[SQL: INSERT INTO '
     "conversation_message (content) VALUES (%s)]\n[parameters: ('my secret diary',)]\n"
     "(Background on this error at: https://sqlalche.me/e/20/gkpj)",
     "Duplicate entry", ("INSERT", "secret diary", "sqlalche.me")),
    ("cannot connect to mysql+aiomysql://memstream:hunter2@db:3306/memstream",
     "mysql+aiomysql://memstream:***@db:3306", ("hunter2",)),
    ("redis://:p4ss@redis:6379/0 refused", "redis://:***@redis", ("p4ss",)),
    ("memos add: HTTP 401: header Authorization: Token k-secret-123 rejected",
     "Token ***", ("k-secret-123",)),
    ("Bearer abcdefghijklmnop is not valid", "Bearer ***", ("abcdefghijklmnop",)),
    ("login failed: password=hunter2; user=bob", "password=***", ("hunter2",)),
    ("api_key: 'sk-live-xyz' refused", "api_key: *** refused", ("sk-live-xyz",)),
    ('{"password": "hunter2", "user": "bob"}', '"password": ***', ("hunter2",)),
    ("sasl_password='pw 1234' and client_secret=abcd", "sasl_password=***",
     ("pw 1234", "abcd")),
    ("access_token=eyJabc.def", "access_token=***", ("eyJabc",)),
    ("mysql://user:p@ss@db/x", "mysql://user:***@db/x", ("p@ss",)),
    ("Authorization: Basic dTpw", "Basic ***", ("dTpw",)),
    ("(1062, \"Duplicate entry 'my secret note' for key 'uq_text'\")",
     "Duplicate entry '***' for key 'uq_text'", ("secret note",)),
    ("(1064, \"... near 'SELECT my private chat' at line 1\")", "near '***'",
     ("private chat",)),
    ("max_tokens: 5 exceeded; tokens=5", "max_tokens: 5 exceeded; tokens=5", ()),
    ("nothing to hide here", "nothing to hide here", ()),
])
def test_redacted(raw: str, kept: str, gone: tuple[str, ...]) -> None:
    out = redacted(raw)
    assert kept in out
    for word in gone:
        assert word not in out


def test_a_real_statement_error_loses_its_sql_and_parameters() -> None:
    engine = create_engine("sqlite://")
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (id INTEGER PRIMARY KEY, content TEXT)"))
        conn.execute(text("INSERT INTO t VALUES (1, 'first')"))
        with pytest.raises(IntegrityError) as caught:
            conn.execute(text("INSERT INTO t VALUES (1, :c)"), {"c": "private words"})
    assert "private words" in str(caught.value)
    out = error_text(caught.value)
    assert out.startswith("IntegrityError: ") and "UNIQUE constraint failed" in out
    assert "private words" not in out and "INSERT" not in out


def test_the_log_filter_cleans_messages_and_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("redaction-test")
    handler = caplog.handler
    handler.addFilter(RedactingFilter())
    try:
        logger.warning("connect to %s failed", "mysql+aiomysql://u:hunter2@db/x")
        try:
            raise RuntimeError("[SQL: SELECT secret FROM t]")
        except RuntimeError:
            logger.exception("query failed with password=hunter2")
    finally:
        handler.removeFilter(handler.filters[-1])
    text_out = caplog.text
    assert "hunter2" not in text_out and "SELECT secret" not in text_out
    assert "mysql+aiomysql://u:***@db/x" in text_out and "RuntimeError" in text_out


def test_a_redacted_record_formats_with_the_worker_s_formatter() -> None:
    """The worker logs through mode's formatter, which formats each argument: a
    record the filter rewrote must still format (it once left ``args`` None, and
    every redacted warning became a logging error with a stack dump)."""
    from mode.utils.logging import ExtensionFormatter

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(ExtensionFormatter(stream=stream, fmt="%(levelname)s %(message)s"))
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("redaction-test-mode")
    logger.addHandler(handler)
    logger.propagate = False
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            logger.warning("database write failed: %s: %s", "OperationalError",
                           "(2003, \"Can't connect\") (Background on this error at: "
                           "https://sqlalche.me/e/20/e3q8)")
    finally:
        logger.removeHandler(handler)
    assert errors.getvalue() == ""  # no "--- Logging error ---"
    assert stream.getvalue() == ("WARNING database write failed: OperationalError: "
                                 "(2003, \"Can't connect\")\n")
