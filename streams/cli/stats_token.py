"""``memstream stats-token --tenant T [--tenant U ...] | --all-tenants``

Makes a bearer token for the stats API. The token is printed once; what the
worker is configured with is only its SHA-256 and tenants, the entry to add to
``MEMSTREAM_WEB__STATS_TOKENS`` (a JSON list)::

    {"token": "…", "entry": {"sha256": "…", "tenants": ["acme"]}}
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any

from streams.cli._common import fail
from streams.stats.access import ALL_TENANTS, new_token, token_hash
from streams.wire.records import TENANT_PATTERN


def register(sub: Any) -> None:
    p = sub.add_parser("stats-token", help="make a bearer token for the /stats API",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--tenant", action="append", help="a tenant it may read (repeatable)")
    who.add_argument("--all-tenants", action="store_true", help="it may read every tenant")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    tenants = [ALL_TENANTS] if args.all_tenants else list(dict.fromkeys(args.tenant))
    for tenant in tenants:
        if tenant != ALL_TENANTS and not re.fullmatch(TENANT_PATTERN, tenant):
            return fail(f"--tenant {tenant!r}: not a tenant id (1-64 characters of "
                        "letters, digits and ._-)", 2)
    token = new_token()
    print(json.dumps({"token": token, "entry": {"sha256": token_hash(token),
                                                "tenants": tenants}}))
    print("memstream: add the entry to MEMSTREAM_WEB__STATS_TOKENS (a JSON list); the token "
          "is not stored anywhere and is shown only now", file=sys.stderr)
    return 0
