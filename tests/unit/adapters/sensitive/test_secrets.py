"""detect-secrets' patterns read in bounded windows: the work is linear in the
text, and a key across a window's edge is still found whole."""

from __future__ import annotations

import re
from typing import Any

import pytest

from streams.adapters.sensitive import secrets
from streams.adapters.sensitive.secrets import CHUNK, OVERLAP, credential_findings, windows
from streams.consolidation.rules.sensitive.kinds import Finding, Kind

KEY = "sk-proj-" + "Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6kM9n" + "T3BlbkFJ" + "Qr5tU8wX1zA4cD7fG0iL"


class _Spy:
    """A pattern that records the length of every string it is given."""

    def __init__(self, pattern: re.Pattern[str], seen: list[int]) -> None:
        self.pattern, self.groups, self.seen = pattern, pattern.groups, seen

    def finditer(self, text: str) -> Any:
        self.seen.append(len(text))
        return self.pattern.finditer(text)


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    lengths: list[int] = []
    monkeypatch.setattr(secrets, "_PATTERNS",
                        tuple(_Spy(p, lengths) for p in secrets._PATTERNS))
    return lengths


def test_no_pattern_reads_more_than_a_chunk(seen: list[int]) -> None:
    text = "sk-" * 40_000
    assert credential_findings(text) == []
    assert max(seen) <= CHUNK
    # linear: about one read of each character per pattern, plus the overlaps
    assert sum(seen) <= len(secrets._PATTERNS) * len(text) * CHUNK / (CHUNK - OVERLAP) + CHUNK * 8


def test_the_windows_cover_the_text_and_every_short_span() -> None:
    for length in (0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 17, 10_000):
        spans = windows(length)
        assert spans[0][0] == 0 and spans[-1][1] == length
        assert all(end - start <= CHUNK for start, end in spans)
        for p in range(0, max(length - OVERLAP, 0), 97):
            assert any(s <= p and p + OVERLAP <= e for s, e in spans)


@pytest.mark.parametrize("cut", [CHUNK, CHUNK - OVERLAP, 2 * (CHUNK - OVERLAP)])
@pytest.mark.parametrize("into", [1, 10, len(KEY) // 2, len(KEY) - 1])
def test_a_key_across_a_window_edge_is_found_whole(seen: list[int], cut: int,
                                                   into: int) -> None:
    start = cut - into
    text = " " * start + KEY + " " * 3000
    assert credential_findings(text) == [Finding(start, start + len(KEY), Kind.SECRET)]
    assert max(seen) <= CHUNK


def test_every_key_in_a_long_text_once() -> None:
    text = "".join(f"note {i}: {KEY} and ghp_{'a1B2' * 9} end. " for i in range(200))
    found = credential_findings(text)
    assert len(found) == 400
    assert {text[f.start:f.end] for f in found} == {KEY, f"ghp_{'a1B2' * 9}"}
