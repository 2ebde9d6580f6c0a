"""Engine creation and the dialect differences the stores need.

MySQL over TLS: the URL's ``ssl_ca``, ``ssl_cert``, ``ssl_key`` and
``ssl_check_hostname`` (default true) query parameters, or ``ssl=true`` for
the system's CAs, become the TLS context of every connection (aiomysql takes a
context, not the driver options SQLAlchemy would pass)::

    mysql+aiomysql://memstream:pw@db:3306/memstream?ssl_ca=/etc/ssl/db-ca.pem
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table, func
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool
from sqlalchemy.sql.dml import Insert

from streams.settings import DatabaseSettings


def create_engine(settings: DatabaseSettings, *, pooled: bool = True) -> AsyncEngine:
    """The engine of ``settings``; ``pooled=False`` (MySQL): one without a pool, whose
    connections are opened for their user and closed with it (one kept open takes
    no place in the pool)."""
    url, context = mysql_tls(make_url(settings.url.get_secret_value()))
    kwargs: dict[str, Any] = {"echo": settings.echo}
    if url.get_backend_name() == "sqlite":
        kwargs["connect_args"] = {"timeout": settings.connect_timeout_s * 6}
    else:
        kwargs["connect_args"] = {"connect_timeout": int(max(1, settings.connect_timeout_s)),
                                  **({"ssl": context} if context is not None else {})}
        kwargs.update(dict(pool_size=settings.pool_size, max_overflow=settings.pool_size,
                           pool_pre_ping=True, pool_recycle=1800,
                           pool_timeout=settings.connect_timeout_s) if pooled
                      else dict(poolclass=NullPool))
    return create_async_engine(url, **kwargs)


TLS_PARAMS = ("ssl", "ssl_ca", "ssl_cert", "ssl_key", "ssl_check_hostname")
_TRUE = ("1", "true", "yes", "on")


def mysql_tls(url: URL) -> tuple[URL, ssl.SSLContext | None]:
    """The URL without its TLS parameters, and the TLS context they describe (None:
    no TLS asked for). Raises ValueError on a certificate without its key."""
    if url.get_backend_name() != "mysql" or not any(p in url.query for p in TLS_PARAMS):
        return url, None
    q = {k: v if isinstance(v, str) else v[-1] for k, v in url.query.items()}
    rest = url.difference_update_query(TLS_PARAMS)
    if q.get("ssl", "true").lower() not in _TRUE and not q.get("ssl_ca"):
        return rest, None
    if bool(q.get("ssl_cert")) != bool(q.get("ssl_key")):
        raise ValueError("database URL: ssl_cert and ssl_key go together")
    context = ssl.create_default_context(cafile=q.get("ssl_ca"))
    context.check_hostname = q.get("ssl_check_hostname", "true").lower() in _TRUE
    if q.get("ssl_cert"):
        context.load_cert_chain(q["ssl_cert"], q["ssl_key"])
    return rest, context


def is_sqlite(engine: AsyncEngine) -> bool:
    return engine.dialect.name == "sqlite"


def insert_ignoring_duplicates(engine: AsyncEngine, table: Table, key: list[str]) -> Insert:
    """INSERT that leaves an existing row (same unique ``key``) exactly as it is."""
    if is_sqlite(engine):
        return sqlite.insert(table).on_conflict_do_nothing(index_elements=key)
    stmt = mysql.insert(table)
    # assigning a key column its own value changes nothing and reports 0 rows
    return stmt.on_duplicate_key_update({key[-1]: table.c[key[-1]]})


def upsert(engine: AsyncEngine, table: Table, key: list[str], update: list[str],
           *, never_lower: Sequence[str] = ()) -> Insert:
    """INSERT, or UPDATE ``update`` columns of the row with the same ``key``; a
    column of ``never_lower`` keeps the greater of its value and the new one."""
    if is_sqlite(engine):
        s = sqlite.insert(table)
        return s.on_conflict_do_update(index_elements=key, set_={
            c: func.max(table.c[c], s.excluded[c]) if c in never_lower else s.excluded[c]
            for c in update})
    m = mysql.insert(table)
    return m.on_duplicate_key_update({
        c: func.greatest(table.c[c], m.inserted[c]) if c in never_lower else m.inserted[c]
        for c in update})
