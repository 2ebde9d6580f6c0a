"""``streams.adapters.db.schema.all_tables`` imports every module that declares tables or indexes,
so the schema Alembic compares with is the whole schema."""

from __future__ import annotations

import re
from pathlib import Path

from streams.adapters.db.schema.all_tables import TABLE_MODULES

ROOT = Path(__file__).resolve().parents[2]
# a SQLAlchemy Table("name", ...) or Index(...): not Faust's app.Table or GlobalTable
DECLARES = re.compile(r"(?<![.\w])(?:Table\(\s*[\"']|Index\()")


def test_every_module_declaring_tables_is_imported() -> None:
    declaring = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for p in (ROOT / "streams").rglob("*.py")
        if DECLARES.search(p.read_text())
    }
    schema = "streams.adapters.db.schema"
    assert {f"{schema}.conversation", f"{schema}.stats"} <= declaring
    assert declaring == {m.__name__ for m in TABLE_MODULES}
