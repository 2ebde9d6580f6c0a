"""What a failed database write means: wait, give up on the row, or find out.

:func:`classify_db_error` is pure: it reads the error the driver raised
(through SQLAlchemy's wrapper, when there is one) — its MySQL/MariaDB error
number (aiomysql/PyMySQL), its SQLite result code, or else its PEP 249 class —
and sorts it into one of three kinds:

``transient``
    the database, the connection to it, or its configuration fails *every*
    write right now: connection refused or lost, server gone away, timeouts,
    deadlocks, lock wait timeouts, too many connections, a read-only or
    shutting-down server, access denied, a table not migrated yet, a busy or
    locked SQLite file. Retried until it passes: no row is to blame, and the
    batch stays unacknowledged meanwhile.
``row``
    this row will always get this error: an incorrect string value, data too
    long, a number or date out of range, an incorrect date-time, NULL in a NOT
    NULL column, a constraint, a packet too large, text the driver cannot
    encode. The batch is split to find the row; the row is refused.
``unknown``
    anything else. The rule for these (see :mod:`streams.adapters.db.isolation`):
    they are tried again a few times; a row that still fails is refused only
    when the database is shown to take other writes — another part of its
    batch was stored, or a probe write succeeds — and otherwise the error is
    treated as transient. Nothing is lost either way (a refused row goes to the
    dead-letter topic with its original bytes), and no single row can stop the
    stream for good.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final

from sqlalchemy.exc import DBAPIError, DisconnectionError, StatementError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError


class DbErrorKind(Enum):
    TRANSIENT = "transient"
    ROW = "row"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class DbError:
    kind: DbErrorKind
    error_class: str
    """The driver's exception class (``DataError``, ``UnicodeEncodeError``, …)."""
    code: int | None = None
    """The MySQL/MariaDB error number or the SQLite extended result code."""

    def describe(self) -> str:
        """Short and free of SQL and row contents: the class and the code."""
        code = f" {self.code}" if self.code is not None else ""
        return f"{self.error_class}{code} ({self.kind.value})"


# MySQL / MariaDB server (ER_*) and client (CR_*) error numbers.
MYSQL_TRANSIENT: Final = frozenset({
    1021,  # disk full
    1037, 1038, 1041,  # out of memory
    1040,  # too many connections
    1042, 1043,  # bad host / handshake
    1044, 1045, 1142, 1143, 1227,  # access denied (configuration: every row gets it)
    1047,  # unknown command (a Galera node not ready)
    1049, 1054, 1146,  # unknown database, column or table (schema not migrated yet)
    1053, 1077, 1078, 1079, 1080,  # server shutdown
    1081, 1129, 1130, 1135,  # sockets, blocked host, threads
    1152, 1154, 1155, 1156, 1157, 1158, 1159, 1160, 1161,  # aborted connection, network
    1180, 1181,  # commit or rollback failed
    1184,  # aborted new connection
    1203, 1226,  # user connection or resource limits
    1205,  # lock wait timeout
    1206,  # lock table full
    1213, 1614,  # deadlock
    1290, 1792, 1836,  # read-only server or transaction (a failover)
    1317,  # query interrupted
    1927,  # connection killed (MariaDB)
    1969, 3024,  # statement timeout (MariaDB, MySQL)
    4031,  # disconnected by the server for inactivity (MySQL)
    2001, 2002, 2003, 2004, 2005, 2006, 2012, 2013, 2014, 2026, 2027, 2048, 2055,  # client
})
MYSQL_ROW: Final = frozenset({
    1048,  # column cannot be null
    1062,  # duplicate entry (another unique key than the idempotency key)
    1118,  # row size too large
    1153,  # packet bigger than max_allowed_packet (splitting the batch helps)
    1197,  # transaction bigger than max_binlog_cache_size (likewise)
    1264, 1690,  # out of range
    1265,  # data truncated
    1292,  # incorrect (date-time) value
    1300,  # invalid character string
    1364,  # no default value
    1365,  # division by zero
    1366,  # incorrect string value
    1367,  # illegal value
    1406,  # data too long
    1411,  # incorrect value for function
    1416,  # cannot get geometry object
    1441,  # date-time function overflow
    1451, 1452,  # foreign key
    1525,  # incorrect value
    1918,  # illegal value in conversion (MariaDB)
    3140,  # invalid JSON text
    3819, 4025,  # check constraint (MySQL, MariaDB)
    4078,  # illegal parameter data type (MariaDB)
})
# SQLite primary result codes (the extended code's low byte)
SQLITE_TRANSIENT: Final = frozenset({
    5,  # BUSY
    6,  # LOCKED
    7,  # NOMEM
    8,  # READONLY
    9,  # INTERRUPT
    10,  # IOERR
    13,  # FULL
    14,  # CANTOPEN
    15,  # PROTOCOL
    17,  # SCHEMA (changed under the statement)
})
SQLITE_ROW: Final = frozenset({
    18,  # TOOBIG
    19,  # CONSTRAINT (NOT NULL, CHECK, UNIQUE)
    20,  # MISMATCH
})
# PEP 249 classes, for errors without a known code
_CLASS_KINDS: Final = {
    "InterfaceError": DbErrorKind.TRANSIENT,
    "OperationalError": DbErrorKind.TRANSIENT,
    "DataError": DbErrorKind.ROW,
    "IntegrityError": DbErrorKind.ROW,
}


def classify_db_error(exc: BaseException) -> DbError:
    """The kind of a failed write (see the module docstring)."""
    if isinstance(exc, PoolTimeoutError | DisconnectionError):
        return DbError(DbErrorKind.TRANSIENT, type(exc).__name__)
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return DbError(DbErrorKind.TRANSIENT, type(exc.orig).__name__)
    driver = exc.orig if isinstance(exc, StatementError) and exc.orig is not None else exc
    name = type(driver).__name__
    if isinstance(driver, UnicodeError):  # text the driver cannot encode (a lone surrogate)
        return DbError(DbErrorKind.ROW, name)
    if isinstance(driver, OSError):  # refused, reset, timed out
        return DbError(DbErrorKind.TRANSIENT, name)
    sqlite_code = getattr(driver, "sqlite_errorcode", None)
    if isinstance(sqlite_code, int):
        code, transient, row = sqlite_code, SQLITE_TRANSIENT, SQLITE_ROW
        listed = sqlite_code & 0xFF
    elif driver.args and type(driver.args[0]) is int:
        code, transient, row = driver.args[0], MYSQL_TRANSIENT, MYSQL_ROW
        listed = code
    else:
        return DbError(_by_class(driver, exc, coded=False), name)
    if listed in transient:
        return DbError(DbErrorKind.TRANSIENT, name, code)
    if listed in row:
        return DbError(DbErrorKind.ROW, name, code)
    return DbError(_by_class(driver, exc, coded=True), name, code)


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a ``transient`` database error: the database fails every
    write now (what consolidation waits out in place)."""
    return classify_db_error(exc).kind is DbErrorKind.TRANSIENT


def _by_class(*errors: BaseException, coded: bool) -> DbErrorKind:
    """By PEP 249 class, the driver's first. PyMySQL raises OperationalError for
    every error number it does not map, so next to an unlisted code that class
    says nothing."""
    for err in errors:
        for cls in type(err).__mro__:
            kind = _CLASS_KINDS.get(cls.__name__)
            if kind is not None:
                if coded and cls.__name__ == "OperationalError":
                    return DbErrorKind.UNKNOWN
                return kind
    return DbErrorKind.UNKNOWN
