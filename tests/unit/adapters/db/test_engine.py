"""TLS parameters of a MySQL URL: table-driven."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from streams.adapters.db.engine import mysql_tls

BASE = "mysql+aiomysql://u:p@db:3306/memstream"


@pytest.mark.parametrize(("query", "tls", "hostname", "rest"), [
    ("", False, None, ""),
    ("?charset=utf8mb4", False, None, "?charset=utf8mb4"),
    ("?ssl=true", True, True, ""),
    ("?ssl=false", False, None, ""),
    ("?charset=utf8mb4&ssl=1&ssl_check_hostname=false", True, False, "?charset=utf8mb4"),
])
def test_mysql_tls(query: str, tls: bool, hostname: bool | None, rest: str) -> None:
    url, context = mysql_tls(make_url(BASE + query))
    assert url.render_as_string(hide_password=False) == BASE + rest
    assert (context is not None) is tls
    if context is not None:
        assert context.check_hostname is hostname and context.verify_mode == ssl.CERT_REQUIRED


def test_a_ca_file_is_loaded_and_a_lone_certificate_refused(tmp_path: Path) -> None:
    missing = tmp_path / "none.pem"
    with pytest.raises(FileNotFoundError):
        mysql_tls(make_url(f"{BASE}?ssl_ca={missing}"))
    with pytest.raises(ValueError, match="ssl_cert and ssl_key"):
        mysql_tls(make_url(f"{BASE}?ssl=true&ssl_cert=/c.pem"))
    sqlite = make_url("sqlite+aiosqlite:///x.db?ssl=true")
    assert mysql_tls(sqlite) == (sqlite, None)
