"""Which ids name a built-in memory: only those memstream writes."""

from __future__ import annotations

import pytest

from streams.memory.model import decimal_id


@pytest.mark.parametrize(("value", "number"), [
    ("1", 1), ("1234", 1234), (42, 42),
    ("01", None), ("0", None), ("²", None), ("١", None), ("-1", None), ("1 ", None),
    ("", None), ("99999999999999999999", None), ("abc", None),
])
def test_only_ids_memstream_writes_name_a_builtin_memory(value: object,
                                                         number: int | None) -> None:
    assert decimal_id(value) == number
