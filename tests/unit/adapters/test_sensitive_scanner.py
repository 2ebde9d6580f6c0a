"""The sensitive-content scanner on the labelled corpus: the floors of per-kind
recall and precision, names with NER, and no network use (the engines load
once per module)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streams.adapters.sensitive.scanner import (
    CHUNK,
    CHUNK_CHARS,
    ScannerClosed,
    SensitiveScanner,
    chunks,
)
from streams.consolidation.rules.sensitive.kinds import STRUCTURED, Kind
from streams.consolidation.rules.sensitive.policy import screen
from streams.devtools.sensitive_eval import Score, load, score

RECALL_FLOOR = 0.95   # cards, IBANs, e-mail, phones, national ids, credentials
NAME_RECALL_FLOOR = 0.85  # English names, NER on (Chinese names are not covered)
ROOT = Path(__file__).resolve().parents[3]
PRECISION_FLOOR = 0.90  # every structured kind: phones and IPs are the weakest (0.93, 0.92)


@pytest.fixture(scope="module")
def scanner() -> SensitiveScanner:
    return SensitiveScanner()


@pytest.fixture(scope="module")
def structured_score(scanner: SensitiveScanner) -> Score:
    return score(load(), scanner.detect, STRUCTURED)


@pytest.mark.parametrize("kind", sorted(STRUCTURED - {Kind.IP}))
def test_recall_of_each_kind_the_issue_names(structured_score: Score, kind: Kind) -> None:
    tally = structured_score.kinds[kind]
    assert tally.expected >= 15
    assert tally.recall >= RECALL_FLOOR, structured_score.misses


@pytest.mark.parametrize("kind", sorted(STRUCTURED))
def test_precision_of_each_structured_kind(structured_score: Score, kind: Kind) -> None:
    assert structured_score.kinds[kind].precision >= PRECISION_FLOOR, structured_score.misses


def test_the_corpus_has_the_size_and_languages_promised() -> None:
    sentences = load()
    assert len(sentences) >= 300
    assert {s.lang for s in sentences} == {"en", "zh"}
    assert sum(not s.expected for s in sentences) >= 80


FRESH_PROCESS = """
import socket
def refuse(*_, **__):
    raise SystemExit("the scanner reached for the network")
socket.getaddrinfo = refuse
socket.socket.connect = refuse
from streams.adapters.sensitive.scanner import SensitiveScanner
text = "write to li.na@example.com.cn or call +86 139 1234 5678, I'm Ann Lee"
found = SensitiveScanner(names=True).detect(text)
print(sorted((f.kind.value, text[f.start:f.end]) for f in found))
"""


def test_a_fresh_process_scans_without_the_network() -> None:
    out = subprocess.run([sys.executable, "-c", FRESH_PROCESS], capture_output=True, text=True,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == ("[('email', 'li.na@example.com.cn'), ('name', 'Ann Lee'), "
                                  "('phone', '+86 139 1234 5678')]")


@pytest.mark.parametrize(("text", "stored"), [
    ("我的卡号是4111 1111 1111 1111，邮箱a.b@qq.com", "我的卡号是[CARD]，邮箱[EMAIL]"),
    ("Call 020 7946 0321 about the flat", "Call [PHONE] about the flat"),
    ("my password is hunter2! do not tell", None),
    ("Order 2023110512345678 shipped 2024-01-05", "Order 2023110512345678 shipped 2024-01-05"),
    # what agent conversations are full of: a package pinned in a URL, a decimal
    # fraction, this machine's own addresses
    ('<link href="https://cdn.jsdelivr.net/npm/bootstrap@5.3.0/dist/css/bootstrap.min.css">',
     '<link href="https://cdn.jsdelivr.net/npm/bootstrap@5.3.0/dist/css/bootstrap.min.css">'),
    ("P(X = 10) = 0.1073741824", "P(X = 10) = 0.1073741824"),
    ("open http://127.0.0.1:5000 or bind 0.0.0.0:8000",
     "open http://127.0.0.1:5000 or bind 0.0.0.0:8000"),
    ("the server is 203.0.113.9", "the server is [IP]"),
    # full-width forms, as a Chinese keyboard types them, are read as their ASCII
    ("卡号４１１１１１１１１１１１１１１１", "卡号[CARD]"),
    ("手机１３８１２３４５６７８", "手机[PHONE]"),
    ("ｂｏｂ＠ｇｍａｉｌ．ｃｏｍ", "[EMAIL]"),
    ("身份证号１１０１０５１９４９１２３１００２Ｘ", "身份证号[ID]"),
    ("submitForm({ email: 'johndoe@example.com' })",
     "submitForm({ email: 'johndoe@example.com' })"),
    ("write to me at johndoe@examples.com", "write to me at [EMAIL]"),
])
def test_the_default_policy_over_the_scanner(scanner: SensitiveScanner, text: str,
                                             stored: str | None) -> None:
    assert screen(text, scanner.detect(text)).text == stored


def test_english_names_with_ner() -> None:
    with_names = SensitiveScanner(names=True)
    english = [s for s in load() if s.lang == "en"]
    result = score(english, with_names.detect, frozenset({Kind.NAME}))
    assert result.kinds[Kind.NAME].expected >= 20
    assert result.kinds[Kind.NAME].recall >= NAME_RECALL_FLOOR, result.misses


async def test_a_few_texts_wait_for_a_chunk_of_a_long_batch_not_for_all_of_it(
        scanner: SensitiveScanner) -> None:
    """One thread screens for every caller: a run of a few messages is screened between
    the chunks of another tenant's long session, and each caller gets its own findings
    in its own order."""
    long = [f"turn {i}: call me at 415-555-{i % 10000:04d}, mail ann{i}@example.com"
            for i in range(3 * CHUNK * 20)]
    few = ["my card is 4111 1111 1111 1111", "nothing here", "ssn 078-05-1120"]
    big = asyncio.ensure_future(scanner.detect_all(long))
    await asyncio.sleep(0)  # its first chunk is on the thread
    assert await scanner.detect_all(few) == [scanner.detect(t) for t in few]
    assert not big.done()  # the long batch is still being screened
    found = await big
    assert len(found) == len(long)
    assert found[::97] == [scanner.detect(t) for t in long[::97]]
    assert await scanner.detect_all([]) == []


@pytest.mark.parametrize(("sizes", "cut"), [
    ([], []),
    ([10] * 3, [3]),
    ([10] * (CHUNK + 1), [CHUNK, 1]),                            # at most CHUNK texts
    ([CHUNK_CHARS // 2] * 3, [2, 1]),                           # at most CHUNK_CHARS
    ([CHUNK_CHARS * 3, 10, 10], [1, 2]),                        # a long text alone
    ([10, CHUNK_CHARS * 3], [1, 1]),
])
def test_chunks(sizes: list[int], cut: list[int]) -> None:
    texts = [str(i % 10) * n for i, n in enumerate(sizes)]
    got = chunks(texts)
    assert [len(c) for c in got] == cut
    assert [t for c in got for t in c] == texts


async def test_closed_mid_batch_each_caller_is_told_so() -> None:
    """The worker stopping closes the scanner: what was handed to its thread finishes,
    and each batch with more to screen raises ``ScannerClosed`` — no caller is told it
    was cancelled when nobody cancelled it."""
    own = SensitiveScanner()
    long = [f"call me at 415-555-{i % 10000:04d}" for i in range(CHUNK * 40)]
    batches = [asyncio.ensure_future(own.detect_all(long)) for _ in range(3)]
    await asyncio.sleep(0.05)
    own.close()
    outcomes = await asyncio.gather(*batches, return_exceptions=True)
    assert all(isinstance(o, ScannerClosed) for o in outcomes), outcomes
    with pytest.raises(ScannerClosed):
        await own.detect_all(["later"])
    assert await own.detect_all([]) == []
