"""Fake HTTP services for tests: MemOS, Mem0 and an OpenAI-compatible model.

Each follows the documented request and response shapes of the real service,
keeps real state, validates request bodies and supports fault injection; see
:mod:`tests.fakes.server`. Names are imported lazily, so that
``python -m tests.fakes.memos`` does not import its own module twice.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.fakes.mem0 import FakeMem0
    from tests.fakes.memos import FakeMemOS
    from tests.fakes.openai import NO_CHOICES, FakeOpenAI, embed_text
    from tests.fakes.server import FakeControl, FakeServer, overlap_score

_WHERE = {
    "FakeMem0": "mem0", "FakeMemOS": "memos", "FakeOpenAI": "openai", "NO_CHOICES": "openai",
    "embed_text": "openai", "FakeControl": "server", "FakeServer": "server",
    "overlap_score": "server",
}
__all__ = ["NO_CHOICES", "FakeControl", "FakeMem0", "FakeMemOS", "FakeOpenAI", "FakeServer",
           "embed_text", "overlap_score"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
