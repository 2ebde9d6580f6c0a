"""memstream's own recognizers: Chinese resident ids, credentials, the CJK view."""

from __future__ import annotations

import pytest

from streams.consolidation.rules.sensitive.kinds import Kind
from streams.consolidation.rules.sensitive.national_ids import resident_id_valid, resident_ids
from streams.consolidation.rules.sensitive.patterns import cjk_blanked, credentials


@pytest.mark.parametrize(("number", "valid"), [
    ("11010519491231002X", True),    # GB 11643's own example
    ("11010519491231002x", True),
    ("440524188001010014", True),
    ("110105194912310021", False),   # wrong check digit
    ("110105194902300027", False),   # 30 February
    ("11010519491231002", False),    # 17 characters
    ("1101051949123100XX", False),
])
def test_resident_id_check(number: str, valid: bool) -> None:
    assert resident_id_valid(number) is valid


@pytest.mark.parametrize(("text", "found"), [
    ("身份证号11010519491231002X，别外传", ["11010519491231002X"]),
    ("ID 440524188001010014.", ["440524188001010014"]),
    ("订单号110105194912310021已发货", []),
    ("流水号911010519491231002X8", []),  # inside a longer number
])
def test_resident_ids_in_text(text: str, found: list[str]) -> None:
    assert [text[f.start:f.end] for f in resident_ids(text)] == found
    assert all(f.kind is Kind.NATIONAL_ID for f in resident_ids(text))


@pytest.mark.parametrize(("text", "found"), [
    ("my password is hunter2!", ["hunter2!"]),
    ("My PIN is 4821.", ["4821"]),
    ("the password for the wifi: 'Sunflower88'", ["Sunflower88"]),
    ("passcode = 7733#", ["7733#"]),
    ("my password is wrong again", []),
    ("the password is too short", []),
    ("I forgot my password", []),
    ("a spiderman pin on your purse. Is Spider-Man your hero?", []),
    ("the pin is gold", []),
    ("the password for my gmail.com account: Qx7-pp", ["Qx7-pp"]),
    # code about passwords is no password: a call, an attribute, a variable, a keyword
    ("    password = db.Column(db.String(120), nullable=False)", []),
    ("password = data.get('password')", []),
    ("if not username or not password:\n        return jsonify(error)", []),
    ("user = User(username=username, password=hashed_password)", []),
    ("password=request.form['password']", []),
    ("password = None", []),
    ('<label for="password">Password:</label>', []),
    ('password = "hunter2"', ["hunter2"]),  # a literal in code is a hard-coded secret
    ("password: letmein", ["letmein"]),
    ("my password is now hunter2", ["hunter2"]),
    ("my password is nowhere to be found", []),
    ("wifi password: blue_sky_42", ["blue_sky_42"]),
    ("password: hunter.two.x", ["hunter.two.x"]),
    ("DB_PASSWORD=Summer2024", ["Summer2024"]),
    ("hashed_password = generate_password_hash(password)", []),
    ('print(f"Hashed password: {new_user.password_hash}")', []),
    ("export PASSWORD=$DB_PASSWORD", []),
    ("我的密码是abc123456，记一下", ["abc123456"]),
    ("支付密码：135790", ["135790"]),
    ("邮箱密码改成了Qwe@2024", ["Qwe@2024"]),
    ("密码是什么来着", []),
    ("密码是１２３４５６", ["１２３４５６"]),  # full-width, as a Chinese keyboard types it
    ("我的密码是：Abc123456", ["Abc123456"]),
    ("密码是: hunter2", ["hunter2"]),
    ("密码 是 hunter2", ["hunter2"]),
    ("key sk-proj-abcdefghijklmnopqrstuvwxyz0123 ok", ["sk-proj-abcdefghijklmnopqrstuvwxyz0123"]),
    ("我的密钥sk-abcdefghijklmnopqrstuvwx。", ["sk-abcdefghijklmnopqrstuvwx"]),
    ("I use scikit-learn and sk-video", []),
    ("t = github_pat_11ABCDEFG0123456789abcd_xyz", ["github_pat_11ABCDEFG0123456789abcd_xyz"]),
    ("rk_test_0123456789abcdefABCD", ["rk_test_0123456789abcdefABCD"]),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTYifQ.SflKxwRJSMeKKF2QT4fw", [
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTYifQ.SflKxwRJSMeKKF2QT4fw"]),
    ("commit 9fceb02d0ae598e95dc970b74767f19372d61af8", []),
])
def test_credentials(text: str, found: list[str]) -> None:
    assert [text[f.start:f.end] for f in credentials(text)] == found


def test_a_private_key_block_is_found_whole_even_cut_short() -> None:
    block = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nAAA=\n-----END RSA PRIVATE KEY-----"
    text = f"key:\n{block}\nthanks"
    assert [text[f.start:f.end] for f in credentials(text)] == [block]
    cut = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk"
    assert [cut[f.start:f.end] for f in credentials(cut)] == [cut]


@pytest.mark.parametrize(("text", "view"), [
    ("卡号4111", "  4111"),
    ("邮箱：a@b.cn。", "  :a@b.cn "),  # a full-width colon is a colon
    ("卡号４１１１　ｘ", "  4111 x"),
    ("plain text", "plain text"),
])
def test_cjk_blanked_keeps_every_offset(text: str, view: str) -> None:
    assert cjk_blanked(text) == view
    assert len(cjk_blanked(text)) == len(text)
