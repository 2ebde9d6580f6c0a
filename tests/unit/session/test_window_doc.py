"""The Session window as a reply carries it: every field but the two kept off the
wire, as ``dataclasses.asdict`` gives them, its lists its own."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from streams.session.reader import SessionWindow

MESSAGES = [{"role": "user", "content": "hi", "metadata": {"k": [1, 2]}},
            {"role": "assistant", "content": "hello"}]


@pytest.mark.parametrize("window", [
    SessionWindow("t", "c", []),
    SessionWindow("t", "c", list(MESSAGES), system=[{"role": "system", "content": "s"}],
                  tool=[{"role": "tool", "content": "x"}], summary="before", tokens=12,
                  truncated=True, source="cache", considered=7, speakers=["u1"],
                  unverified=True),
])
def test_the_reply_document_is_the_window_less_what_stays_off_the_wire(
        window: SessionWindow) -> None:
    expected = asdict(window)
    del expected["speakers"], expected["unverified"]
    doc = window.to_dict()
    assert doc == expected and list(doc) == list(expected)
    doc["messages"].append({"role": "user", "content": "later"})
    assert len(window.messages) == len(expected["messages"])
