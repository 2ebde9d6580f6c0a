"""The scanner against a hostile review's evasions, end to end (the default policy
masks what it finds), and the bound on the work one text may cost: counted in
checks made, not in seconds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import phonenumbers.phonenumbermatcher
import pytest
from presidio_analyzer.predefined_recognizers import CreditCardRecognizer, IpRecognizer

from streams.adapters.sensitive.scanner import SensitiveScanner
from streams.consolidation.rules.sensitive.kinds import Kind
from streams.consolidation.rules.sensitive.policy import screen

ZWSP, ZWJ, WJ, BOM, SHY = "\u200b", "\u200d", "\u2060", "\ufeff", "\u00ad"


@pytest.fixture(scope="module")
def scanner() -> SensitiveScanner:
    return SensitiveScanner()


@pytest.mark.parametrize(("text", "stored"), [
    # cards split by dots, slashes or a line break (Luhn still checked)
    ("card 4111.1111.1111.1111 ok", "card [CARD] ok"),
    ("card 4111/1111/1111/1111 ok", "card [CARD] ok"),
    ("card 4111 1111\n1111 1111 ok", "card [CARD] ok"),
    # ... by a tab, a no-break, thin, figure or ideographic space; or hidden by
    # invisible format characters, combining marks or blank fillers
    ("card 4111\u00a01111\u00a01111\u00a01111 ok", "card [CARD] ok"),
    ("card 4111\t1111\u20091111\u30001111 ok", "card [CARD] ok"),
    ("card 4111\u061c1111\U000e0041 1111 1111 ok", "card [CARD] ok"),
    ("card 4\u0308111\u28001111\u28001111\u28001111 ok", "card [CARD] ok"),
    ("卡号5500.0000.0000.0004", "卡号[CARD]"),
    ("card 4111.1111.1111.1112 ok", "card 4111.1111.1111.1112 ok"),       # fails Luhn
    ("card 4111.1111/1111 1111 ok", "card 4111.1111/1111 1111 ok"),       # mixed marks
    ("years\n1999\n2000\n2001\n2002", "years\n1999\n2000\n2001\n2002"),   # lines, not a card
    ("Patch notes for 2024.11.02 are out.", "Patch notes for 2024.11.02 are out."),
    # invisible characters inside any kind, masked with the value
    (f"card 4111{ZWSP}1111{ZWSP}1111{ZWSP}1111 ok", "card [CARD] ok"),
    (f"mail bo{SHY}b@gm{ZWJ}ail.com now", "mail [EMAIL] now"),
    (f"id 11010519491231{WJ}002X", "id [ID]"),
    (f"IBAN DE89{BOM}370400440532013000", "IBAN [IBAN]"),
    (f"ip 203.0{ZWSP}.113.9", "ip [IP]"),
    # IBANs in lower case, checksum still checked
    ("iban de89 3704 0044 0532 0130 00 ok", "iban [IBAN] ok"),
    ("my iban is gb29nwbk60161331926819.", "my iban is [IBAN]."),
    ("iban de89 3704 0044 0532 0130 01 ok", "iban de89 3704 0044 0532 0130 01 ok"),
    ("Refund to ES14 0217 5783 5521 7006 3456 please.", "Refund to [IBAN] please."),
    # SSNs stated as such, without dashes
    ("my SSN is 123456789", "my SSN is [ID]"),
    ("社会安全号 536904172", "社会安全号 [ID]"),
    ("order 536904172 shipped", "order 536904172 shipped"),
    # national ids with spaces
    ("NINO AB 12 34 56 C", "NINO [ID]"),
    ("身份证 110105 19491231 002X", "身份证 [ID]"),
    # obfuscated e-mail addresses
    ("bob(at)gmail.com", "[EMAIL]"),
    ("bob [at] gmail [dot] com", "[EMAIL]"),
    ("mail bob at gmail dot com today", "mail [EMAIL] today"),
    ("I work at google.com", "I work at google.com"),
    ("bob at gmail dot nowhere", "bob at gmail dot nowhere"),
    ("we are at example dot com", "we are at example dot com"),
    # the known false positives
    ("version 2.4.1.0", "version 2.4.1.0"),
    ("git@github.com:org/repo.git", "git@github.com:org/repo.git"),
    ("the server is 10.2.3.4", "the server is [IP]"),
])
def test_evasions_under_the_default_policy(scanner: SensitiveScanner, text: str,
                                           stored: str) -> None:
    assert screen(text, scanner.detect(text)).text == stored


@pytest.mark.parametrize("text", [
    "maps key AIzaSyD3xPq9-kLmN0pQrStUvWxYz_1234567ab",
    "gitlab token glpat-xY9kLmN0pQrStUvWxYz1",
    "DATABASE_URL=postgres://app:Sup3rS3cret@db.internal:5432/app",
    "redis://:pw123@cache:6379/0",
    "mongodb+srv://u:p4ss@cluster0.mongodb.net/x",
    f"key ghp_{ZWSP}abcdefghijABCDEFGHIJ0123456789abcdef",
])
def test_credentials_drop_the_memory(scanner: SensitiveScanner, text: str) -> None:
    found = scanner.detect(text)
    assert {f.kind for f in found} == {Kind.SECRET}
    assert screen(text, found).dropped


def counting(calls: list[int], method: Callable[..., Any]) -> Callable[..., Any]:
    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return method(*args, **kwargs)
    return counted


ADVERSARIAL = {
    "addresses": "1.2.3.4 ",
    "digits": "4111-1111 1111.1111/ 0917 ",
    "cards failing Luhn": "4111 1111 1111 1112 ",
    "chinese digits": "我的号码是138１２３４５６７８，",
}


@pytest.mark.parametrize("unit", list(ADVERSARIAL))
def test_the_checks_per_text_are_bounded(scanner: SensitiveScanner,
                                         monkeypatch: pytest.MonkeyPatch, unit: str) -> None:
    """Phone parses, Luhn checks and address checks stop growing with the text: a
    text four times longer costs the same number of checks."""
    counts: dict[int, int] = {}
    for size in (25_000, 100_000):
        calls: list[int] = []
        monkeypatch.setattr(phonenumbers.phonenumbermatcher, "parse",
                            counting(calls, phonenumbers.phonenumbermatcher.parse))
        monkeypatch.setattr(CreditCardRecognizer, "validate_result",
                            counting(calls, CreditCardRecognizer.validate_result))
        monkeypatch.setattr(IpRecognizer, "invalidate_result",
                            counting(calls, IpRecognizer.invalidate_result))
        text = (ADVERSARIAL[unit] * (size // len(ADVERSARIAL[unit]) + 1))[:size]
        scanner.detect(text)
        counts[size] = len(calls)
        monkeypatch.undo()
    assert counts[100_000] <= counts[25_000] * 1.1 + 10, counts
    assert counts[100_000] < 20_000, counts


def test_past_the_budget_a_card_is_still_found(scanner: SensitiveScanner) -> None:
    text = "4111 1111 1111 1112 " * 2_000 + "and mine: 4111 1111 1111 1111"
    found = scanner.detect(text)
    assert any(text[f.start:f.end] == "4111 1111 1111 1111" and f.kind is Kind.CARD
               for f in found)
    stored = screen(text, found).text
    assert stored is not None and "4111 1111 1111 1111" not in stored


def test_a_text_without_digits_is_not_read_by_the_recognizers_of_digit_kinds() -> None:
    from streams.adapters.sensitive.structured import MADE_OF_DIGITS, StructuredRecognizers
    recognizers = StructuredRecognizers()
    read: list[str] = []
    for r in recognizers._recognizers:
        r._checked = (lambda f, k: lambda text: (read.append(k), f(text))[1])(  # type: ignore[method-assign]
            r._checked, r.kind.value)
    recognizers.findings("write to me at ann.lee@fastmail.com, no numbers here")
    assert read and not set(read) & {k.value for k in MADE_OF_DIGITS}
    for digits in ("4111 1111 1111 1111", "４１１１ １１１１ １１１１ １１１１", "٤١١١"):
        read.clear()
        recognizers.findings(f"card {digits}")
        assert {k.value for k in MADE_OF_DIGITS} <= set(read), digits


def test_a_clause_read_inside_its_message_finds_what_it_finds_alone(
        scanner: SensitiveScanner) -> None:
    """The projection of :mod:`streams.consolidation.rules.sensitive.within` against the
    real scanner, on every clause of the corpus: each finding of the clause read alone
    lies inside a finding of the same kind of its message."""
    import json
    import re
    from pathlib import Path

    from streams.consolidation.rules.sensitive.within import findings_within, said_within
    corpus = Path(__file__).resolve().parents[2] / "data" / "sensitive_corpus.jsonl"
    checked = 0
    for line in corpus.read_text().splitlines():
        text = json.loads(line)["text"]
        episode = f"User: {text}"
        in_episode = scanner.detect(episode)
        for part in filter(None, (p.strip() for p in re.split(r"(?<=[.!?。；;，,])\s*", text))):
            at = said_within(part, [episode])
            if at is None:
                continue
            checked += 1
            projected = findings_within(in_episode, at[1], len(part))
            for f in scanner.detect(part):
                assert any(p.start <= f.start and p.end >= f.end and p.kind == f.kind
                           for p in projected), (part, f, projected)
    assert checked > 400
