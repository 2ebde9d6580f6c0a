"""memstream's own rules against a hostile review's evasions: invisible characters,
grouped and bare national ids, obfuscated e-mail addresses, new key formats and
URLs' passwords, and the shapes that name nobody (versions, git remotes)."""

from __future__ import annotations

import unicodedata

import pytest

from streams.consolidation.rules.sensitive.emails import address, obfuscated_emails
from streams.consolidation.rules.sensitive.kinds import Finding, Kind
from streams.consolidation.rules.sensitive.national_ids import (
    resident_ids,
    ssn_issuable,
    stated_ssns,
)
from streams.consolidation.rules.sensitive.nobody import names_nobody
from streams.consolidation.rules.sensitive.patterns import credentials
from streams.consolidation.rules.sensitive.visible import INVISIBLE, visible

ZWSP, ZWNJ, ZWJ, WJ, BOM, SHY = "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"


FILLERS = {"\u115f", "\u1160", "\u3164", "\uffa0", "\u2800"}


def test_the_invisible_characters_are_format_characters_marks_and_blank_fillers() -> None:
    chars = {chr(c) for c in range(0x110000) if INVISIBLE.fullmatch(chr(c))}
    assert {ZWSP, ZWNJ, ZWJ, WJ, BOM, SHY, "\u061c", "\ufff9", "\U000e0041", "\u034f",
            "\ufe0f", "\U000e0100", "\u0308"} | FILLERS <= chars
    # ("Cn": assigned in the regex engine's newer Unicode, not yet in this Python's)
    assert all(unicodedata.category(c) in ("Cf", "Mn", "Cn") for c in chars - FILLERS)
    assert {chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf"} <= chars


@pytest.mark.parametrize(("written", "value"), [
    (f"card 4111{ZWSP}1111 1111 1111 ok", f"4111{ZWSP}1111 1111 1111"),
    (f"mail bo{SHY}b@gm{ZWJ}ail.com", f"bo{SHY}b@gm{ZWJ}ail.com"),
    (f"{BOM}{WJ}ab{ZWNJ}{ZWNJ}cd", f"ab{ZWNJ}{ZWNJ}cd"),
    ("card 4111\u061c1111\U000e00411111 1111 ok", "4111\u061c1111\U000e00411111 1111"),
    ("card 4\u0308111\u28001111 1111 1111 ok", "4\u0308111\u28001111 1111 1111"),
])
def test_a_finding_in_the_visible_text_maps_back_to_the_written_one(written: str,
                                                                       value: str) -> None:
    seen = visible(written)
    assert INVISIBLE.search(seen.text) is None
    plain = INVISIBLE.sub("", value)
    start = seen.text.index(plain)
    back = seen.original(Finding(start, start + len(plain), Kind.CARD))
    assert written[back.start:back.end] == value


def test_a_text_without_invisible_characters_is_its_own_view() -> None:
    seen = visible("plain")
    assert seen.text == "plain" and seen.original(Finding(1, 3, Kind.IP)) == Finding(1, 3, Kind.IP)


@pytest.mark.parametrize(("text", "found"), [
    ("身份证号 110105 19491231 002X 别外传", ["110105 19491231 002X"]),
    ("ID 110105-1949-1231-002X.", ["110105-1949-1231-002X"]),
    ("证件号440524 18800101 0014", ["440524 18800101 0014"]),
    ("身份证号11010519491231002X", ["11010519491231002X"]),
    ("订单 110105 19491231 0021", []),          # wrong check character
    ("流水 110105 19490230 0027", []),          # 30 February
    ("电话 110105 19491231 002X 9", ["110105 19491231 002X"]),
    ("编号 9110105 19491231 002X", []),         # inside a longer number
])
def test_grouped_resident_ids(text: str, found: list[str]) -> None:
    assert [text[f.start:f.end] for f in resident_ids(text)] == found


@pytest.mark.parametrize(("text", "found"), [
    ("my SSN is 123456789", ["123456789"]),
    ("SSN: 219099999 for the form", ["219099999"]),
    ("Social security number 536-90-4172.", ["536-90-4172"]),
    ("my social is 536 90 4172", ["536 90 4172"]),
    ("ss# 536904172", ["536904172"]),
    ("社会安全号 123456789", ["123456789"]),
    ("我的社会安全号码是536904172", ["536904172"]),
    ("order 123456789 shipped", []),            # nine digits, not stated as an SSN
    ("my SSN is 000123456", []),                # area 000 is never issued
    ("SSN 666-12-3456", []),
    ("SSN 912345678", []),                      # areas 900-999 are not SSNs
    ("SSN is 123450000", []),                   # serial 0000
    ("ssn 1234567890", []),                     # ten digits
    ("social media 123456789 followers", []),
    ("SSNs are 9 digits", []),
])
def test_ssns_stated_as_such(text: str, found: list[str]) -> None:
    assert [text[f.start:f.end] for f in stated_ssns(text)] == found
    assert all(f.kind is Kind.NATIONAL_ID for f in stated_ssns(text))


def test_ssn_groups() -> None:
    assert ssn_issuable("536904172") and ssn_issuable("123456789")
    assert not any(ssn_issuable(d) for d in ("000904172", "666904172", "900904172",
                                             "536004172", "536900000"))


def known_domain(written: str) -> bool:
    return written.rpartition("@")[2].lower().endswith((".com", ".co.uk", ".org"))


@pytest.mark.parametrize(("text", "found"), [
    ("bob(at)gmail.com", ["bob(at)gmail.com"]),
    ("write to bob [at] gmail [dot] com", ["bob [at] gmail [dot] com"]),
    ("bob at gmail dot com", ["bob at gmail dot com"]),
    ("reach me at j.smith AT outlook DOT co DOT uk.", ["j.smith AT outlook DOT co DOT uk"]),
    ("mail li_wei {at} acme-corp.org today", ["li_wei {at} acme-corp.org"]),
    ("I work at google.com", []),               # the word "at" and a real dot: no address
    ("look at google dot com", []),             # a common word before "at"
    ("meet at noon dot", []),
    ("bob at gmail", []),
    ("bob(at)gmail.nowhere", []),               # no known domain
    ("the (at) sign", []),
])
def test_obfuscated_emails(text: str, found: list[str]) -> None:
    assert [text[f.start:f.end] for f in obfuscated_emails(text, known_domain)] == found


def test_an_obfuscated_address_is_checked_as_the_address_it_spells() -> None:
    assert address("bob [at] gmail [dot] com") == "bob@gmail.com"
    assert address("j.smith AT outlook DOT co DOT uk") == "j.smith@outlook.co.uk"


KEY_GOOGLE = "AIzaSyD3xPq9-kLmN0pQrStUvWxYz_1234567ab"  # AIza and 35
KEY_GITLAB = "glpat-xY9kLmN0pQrStUvWxYz1"


@pytest.mark.parametrize(("text", "found"), [
    (f"maps key {KEY_GOOGLE} in the app", [KEY_GOOGLE]),
    (f"token={KEY_GITLAB}", [KEY_GITLAB]),
    ("gldt-abcdefghijklmnopqrstu for deploys", ["gldt-abcdefghijklmnopqrstu"]),
    ("AIzaShort123 is no key", []),
    ("glpat-short", []),
    ("postgres://user:pw@host/db", ["pw"]),
    ("DATABASE_URL=mysql://root:s3cret@db.local:3306/app", ["s3cret"]),
    ("mongodb+srv://u:p4ss@cluster0.mongodb.net/x", ["p4ss"]),
    ("redis://:pw123@cache:6379/0", ["pw123"]),
    ("jdbc:postgresql://admin:Adm1n!@10.0.0.5/prod", ["Adm1n!"]),
    ("https://alice:hunter2@example.com/repo.git", ["hunter2"]),
    ("postgres://localhost:5432/db", []),       # a port, no password
    ("ssh://git@github.com/org/repo.git", []),  # a user, no password
    ("postgres://user:${DB_PASSWORD}@host/db", []),
    ("postgres://user:****@host/db", []),
    ("postgres://user:<password>@host/db", []),
])
def test_keys_and_urls_passwords(text: str, found: list[str]) -> None:
    got = [text[f.start:f.end] for f in credentials(text)]
    assert got == found


@pytest.mark.parametrize(("text", "value", "kind", "nobody"), [
    ("version 2.4.1.0", "2.4.1.0", Kind.IP, True),
    ("Version 1.2.3.4 of the firmware", "1.2.3.4", Kind.IP, True),
    ("v 10.1.2.3 is out", "10.1.2.3", Kind.IP, True),
    ("固件版本号 2.4.1.0", "2.4.1.0", Kind.IP, True),
    ("OID 1.3.6.1.4.1", "1.3.6.1", Kind.IP, True),  # part of a longer dotted number
    ("OID 1.3.6.1.4.1", "6.1.4.1", Kind.IP, True),
    ("the server 10.2.3.4 is down", "10.2.3.4", Kind.IP, False),
    ("IP: 203.0.113.9", "203.0.113.9", Kind.IP, False),
    ("git@github.com:org/repo.git", "git@github.com", Kind.EMAIL, True),
    ("clone git@gitlab.com:~user/x", "git@gitlab.com", Kind.EMAIL, True),
    ("ssh://git@github.com/org/repo", "git@github.com", Kind.EMAIL, True),
    ("mail bob@gmail.com: thanks", "bob@gmail.com", Kind.EMAIL, False),
    ("see https://x.org bob@gmail.com", "bob@gmail.com", Kind.EMAIL, False),
])
def test_what_names_nobody(text: str, value: str, kind: Kind, nobody: bool) -> None:
    start = text.index(value)
    assert names_nobody(text, Finding(start, start + len(value), kind)) is nobody
