"""Which database errors are waited out, which refuse a row, and which are unknown."""

from __future__ import annotations

import sqlite3

import pymysql.err as my
import pytest
from sqlalchemy import exc as sa

from streams.adapters.db.errors import DbErrorKind, classify_db_error

T, R, U = DbErrorKind.TRANSIENT, DbErrorKind.ROW, DbErrorKind.UNKNOWN


def wrapped(cls: type[sa.DBAPIError], orig: BaseException,
            invalidated: bool = False) -> sa.DBAPIError:
    """As SQLAlchemy raises a driver error."""
    return cls("INSERT INTO conversation_message …", {}, orig,
               connection_invalidated=invalidated)  # type: ignore[arg-type]


def sqlite_error(cls: type[sqlite3.Error], code: int) -> sqlite3.Error:
    err = cls("sqlite says no")
    err.sqlite_errorcode = code  # type: ignore[attr-defined]
    return err


@pytest.mark.parametrize(
    ("exc", "kind", "code"),
    [
        # MySQL / MariaDB through aiomysql (PyMySQL's classes), as SQLAlchemy wraps them
        (wrapped(sa.OperationalError, my.OperationalError(2003, "Can't connect")), T, 2003),
        (wrapped(sa.OperationalError, my.OperationalError(2006, "gone away")), T, 2006),
        (wrapped(sa.OperationalError, my.OperationalError(2013, "Lost connection")), T, 2013),
        (wrapped(sa.OperationalError, my.OperationalError(1040, "Too many connections")), T,
         1040),
        (wrapped(sa.OperationalError, my.OperationalError(1205, "Lock wait timeout")), T, 1205),
        (wrapped(sa.OperationalError, my.OperationalError(1213, "Deadlock found")), T, 1213),
        (wrapped(sa.OperationalError, my.OperationalError(1927, "Connection was killed")), T,
         1927),
        (wrapped(sa.OperationalError, my.OperationalError(1969, "max_statement_time")), T, 1969),
        (wrapped(sa.OperationalError, my.OperationalError(1290, "--read-only")), T, 1290),
        (wrapped(sa.OperationalError, my.OperationalError(1045, "Access denied")), T, 1045),
        (wrapped(sa.ProgrammingError, my.ProgrammingError(1146, "doesn't exist")), T, 1146),
        (wrapped(sa.InterfaceError, my.InterfaceError(0, "")), T, 0),
        (wrapped(sa.OperationalError, my.OperationalError("Received extra packet")), T, None),
        (wrapped(sa.DataError, my.DataError(1406, "Data too long")), R, 1406),
        (wrapped(sa.OperationalError, my.OperationalError(1366, "Incorrect string value")), R,
         1366),
        (wrapped(sa.DataError, my.DataError(1264, "Out of range value")), R, 1264),
        (wrapped(sa.DataError, my.DataError(1292, "Incorrect datetime value")), R, 1292),
        (wrapped(sa.IntegrityError, my.IntegrityError(1048, "cannot be null")), R, 1048),
        (wrapped(sa.OperationalError, my.OperationalError(4025, "CONSTRAINT failed")), R, 4025),
        (wrapped(sa.OperationalError, my.OperationalError(1153, "max_allowed_packet")), R, 1153),
        (wrapped(sa.IntegrityError, my.IntegrityError(1586, "Duplicate entry")), R, 1586),
        # PyMySQL raises OperationalError for every number it does not map: unknown
        (wrapped(sa.OperationalError, my.OperationalError(1105, "Unknown error")), U, 1105),
        (wrapped(sa.InternalError, my.InternalError(1030, "Got error from engine")), U, 1030),
        (wrapped(sa.ProgrammingError, my.ProgrammingError(1064, "syntax")), U, 1064),
        # whatever the error, a connection SQLAlchemy invalidated is transient
        (wrapped(sa.DataError, my.DataError(1406, "x"), invalidated=True), T, None),
        # SQLite through aiosqlite (extended result codes)
        (wrapped(sa.OperationalError, sqlite_error(sqlite3.OperationalError, 5)), T, 5),
        (wrapped(sa.OperationalError, sqlite_error(sqlite3.OperationalError, 517)), T, 517),
        (wrapped(sa.OperationalError, sqlite_error(sqlite3.OperationalError, 10)), T, 10),
        (wrapped(sa.OperationalError, sqlite_error(sqlite3.OperationalError, 13)), T, 13),
        (wrapped(sa.IntegrityError, sqlite_error(sqlite3.IntegrityError, 1299)), R, 1299),
        (wrapped(sa.IntegrityError, sqlite_error(sqlite3.IntegrityError, 275)), R, 275),
        (wrapped(sa.DataError, sqlite_error(sqlite3.DataError, 18)), R, 18),
        (wrapped(sa.OperationalError, sqlite_error(sqlite3.OperationalError, 1)), U, 1),
        (wrapped(sa.ProgrammingError, sqlite3.ProgrammingError("Error binding parameter")), U,
         None),
        # without a code: the PEP 249 class
        (wrapped(sa.OperationalError, Exception("gone away")), T, None),
        (wrapped(sa.IntegrityError, Exception("dup")), R, None),
        (wrapped(sa.DataError, Exception("too long")), R, None),
        (wrapped(sa.ProgrammingError, Exception("?")), U, None),
        # outside the driver
        (UnicodeEncodeError("utf-8", "x\ud800", 1, 2, "surrogates not allowed"), R, None),
        (sa.StatementError("bind failed", "INSERT", {}, UnicodeEncodeError(
            "utf-8", "\ud800", 0, 1, "surrogates")), R, None),
        (sa.StatementError("bind failed", "INSERT", {}, TypeError("not a datetime")), U, None),
        (ConnectionRefusedError(111, "refused"), T, None),
        (ConnectionResetError(), T, None),
        (TimeoutError(), T, None),
        (OSError(113, "no route"), T, None),
        (sa.TimeoutError("QueuePool limit reached"), T, None),
        (sa.DisconnectionError("gone"), T, None),
        (ValueError("a bug"), U, None),
        (RuntimeError("readexactly() called while another coroutine is waiting"), U, None),
    ],
)
def test_database_errors_are_classified(exc: BaseException, kind: DbErrorKind,
                                        code: int | None) -> None:
    got = classify_db_error(exc)
    assert got.kind is kind
    assert got.code == code


def test_the_description_names_class_and_code_never_the_statement() -> None:
    exc = wrapped(sa.DataError, my.DataError(1406, "Data too long for column 'content' at row 1"))
    described = classify_db_error(exc).describe()
    assert described == "DataError 1406 (row)"
    assert classify_db_error(UnicodeEncodeError("utf-8", "\ud800", 0, 1, "x")).describe() == (
        "UnicodeEncodeError (row)")
