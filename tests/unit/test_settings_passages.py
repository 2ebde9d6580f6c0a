"""The passage sizes beside ``episode_max_chars``: any episode size loads (passages are
then cut to it), and a target above the maximum is refused."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from streams.settings import ConsolidationSettings


@pytest.mark.parametrize(("values", "ok"), [
    ({}, True),
    ({"episode_max_chars": 60}, True),
    ({"episode_max_chars": 60, "passage_max_chars": 50, "passage_target_chars": 50}, True),
    ({"passage_target_chars": 1200}, False),
    ({"passage_target_chars": 400, "passage_max_chars": 300}, False),
])
def test_passage_sizes(values: dict[str, int], ok: bool) -> None:
    if ok:
        ConsolidationSettings(**values)
    else:
        with pytest.raises(ValidationError, match="passage_target_chars must not exceed"):
            ConsolidationSettings(**values)
