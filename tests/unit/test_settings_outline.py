"""The outline's line length: 0 turns the outline off; a line holds at least a sentence."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from streams.settings import QuerySettings


@pytest.mark.parametrize(("chars", "ok"), [(0, True), (40, True), (160, True), (1000, True),
                                           (1, False), (39, False), (-1, False),
                                           (1001, False)])
def test_outline_chars(chars: int, ok: bool) -> None:
    if ok:
        assert QuerySettings(outline_chars=chars).outline_chars == chars
    else:
        with pytest.raises(ValidationError, match="outline_chars"):
            QuerySettings(outline_chars=chars)
