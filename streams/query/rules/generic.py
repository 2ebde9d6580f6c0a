"""Queries with no content words: "What do you know about me?", "Anything I should
remember?", 你都知道我什么？

Keyword retrieval finds nothing for them (every word is a stopword, a question
word, or a word about memory itself: know, remember, tell, anything …), so the
engine answers them with the user's strongest memories instead
(:mod:`.strength`). A query is generic when :func:`content_terms` is empty:
the search terms of the query (:func:`~streams.memory.rules.lexical.query_terms`)
without these words, and, in Chinese, without the phrases that say the same
(知道, 记得, 关于, 什么 …) and the pronouns and particles around them.
Greetings and thanks carry no content either ("Hi!", "谢谢").
"""

from __future__ import annotations

import re

from streams.memory.rules.lexical import query_terms, tokenize

_META = """know knew known knows remember remembered remembering recall recalled tell told
    anything everything something nothing stuff thing things info information memory memories
    note notes noted learn learned learnt keep kept say said mind minded lately recently
    profile summary summarize summarise detail details fact facts myself yourself yourselves
    about should could would anyone everyone somebody anybody please thanks thank hello hi hey
    morning evening afternoon good great sure right well let us get got give go going"""
META_TERMS = frozenset(t for w in _META.split() for t in tokenize(w))
_ZH_META_WORDS = """知道 记得 记住 记下 关于 什么 哪些 一些 一下 东西 事情 事 应该 告诉 了解 信息
    所有 全部 任何 都 些 有 没有 吗 呢 吧 啊 了 的 是 还 么 你 我 我们 你们 请 谢谢 你好
    早上好 晚上好 能 可以 要 想 说 过 记 对 和 给"""
_ZH_META = re.compile("|".join(sorted(_ZH_META_WORDS.split(), key=len, reverse=True)))


def content_terms(text: str) -> list[str]:
    """The search terms of ``text`` that say what it is about (none for a generic query)."""
    return [t for t in query_terms(_ZH_META.sub(" ", text)) if t not in META_TERMS]


def is_generic(text: str) -> bool:
    """Whether ``text`` asks for memory without naming anything to look for."""
    return bool(text.strip()) and not content_terms(text)
