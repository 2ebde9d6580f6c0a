"""The credentials memstream recognizes itself, where the libraries have none,
and the view of a text its pattern recognizers read (national ids:
``national_ids``; obfuscated e-mail addresses: ``emails``).

* Credentials the secret scanners' patterns miss: OpenAI-style ``sk-`` keys
  without the legacy ``T3BlbkFJ`` marker, GitHub fine-grained tokens, Stripe
  keys of either mode, Google API keys (``AIza`` and 35 characters), GitLab
  tokens (``glpat-`` and the other ``gl…-`` prefixes, 20 characters or more),
  JSON Web Tokens (three base64url segments), the whole of a PEM/OpenSSH/PGP
  private key block (header to footer), the password of a URL or connection
  string (``postgres://user:PASSWORD@host/db``, ``redis://:PASSWORD@cache``;
  a template's placeholder there is none), and passwords or
  PINs *stated as such* in English ("my password is X", "PIN: 1234") and
  Chinese ("密码是X", "支付密码：X"). A stated value that is a common word
  ("my password is wrong") is not a credential, a PIN is digits, and what
  the password is for ("the password for the NAS is X") stays within the
  sentence.

:func:`cjk_blanked` is the view of a text that pattern recognizers written
for space-separated languages read: full-width ASCII (``４１１１``, ``＠``, typed
on a Chinese keyboard) becomes ASCII and every other CJK character a space, so
``卡号4111…`` has the word boundary before the digits that ``\\b`` patterns
need, and every offset stays the offset of the original text.
"""

from __future__ import annotations

import re

from streams.consolidation.rules.sensitive.kinds import Finding, Kind

_CJK = re.compile(r"[\u2e80-\u2fff\u3000-\u303f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff"
                  r"\uf900-\ufaff\uff00\uff5f-\uffef]")
# full-width ASCII (what a Chinese keyboard types: "４１１１", "＠", "："), one for one
_HALFWIDTH = {0xFF01 + i: 0x21 + i for i in range(0x5E)} | {0x3000: 0x20}

_KEYS = tuple(re.compile(p, re.S) for p in (
    r"(?<![\w-])sk-(?:proj-|svcacct-|admin-|ant-(?:api\d\d-)?)?[A-Za-z0-9_-]{20,}",
    r"(?<!\w)github_pat_[A-Za-z0-9_]{22,}",
    r"(?<!\w)(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}",
    r"(?<![\w-])AIza[0-9A-Za-z_-]{35}(?![\w-])",
    r"(?<![\w-])gl(?:pat|dt|rt|ptt|ft|cbt|imt|oas|soat)-[0-9A-Za-z_-]{20,}",
    r"(?<![\w-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
    r".*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
))

# a URL's password: scheme://user:PASSWORD@host (the scheme starts a word, so a long
# run of letters is read once, not from each of its characters)
_URL_PASSWORD = re.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,30}://[^\s:/@]{0,256}:"
    r"(?P<value>[^\s:/@]{1,256})@(?=[\w\[])")
_MASKED = re.compile(r"\*+|x+|X+|<[^>]*>|\[[^\]]*\]")  # "user:***@", "user:<password>@"
_STATED_EN = re.compile(
    r"(?<![A-Za-z0-9])(?:(?P<pin>pin)(?: code| number)?|password|passcode|passphrase|passwd"
    r"|pwd)"
    r"(?:\s+(?:for|to|of|on)\s+(?:my\s+|the\s+)?[\w@-]+(?:\.[\w@-]+)*"
    r"(?:\s+[\w@-]+(?:\.[\w@-]+)*)?)?"
    r"(?:\s+(?:is now\b|is|was|would be)[ \t]*:?|[ \t]*(?:(?P<assign>=)|:))[ \t]*"
    r"(?P<quote>[\"'“‘`]?)(?P<value>[^\s\"'“”‘’`]+)", re.I)
_STATED_ZH = re.compile(
    r"(?:密码|密碼|口令|PIN码|pin码)\s*(?:(?:是|为|為|改成了|改成|设成|设为)\s*[:：=]?|[:：=])"
    r"\s*[\"'“‘「]?(?P<value>[!-~]+)")
_TRAILING = ".,;:)]}>"  # sentence punctuation; "!" and "?" stay: passwords end in them
_COMMON_WORDS = """
    a an the my your his her our their its this that it not no never still also just
    very so too quite really pretty same different wrong right correct incorrect
    weak strong secure safe unsafe long short easy hard simple complex good bad fine ok
    okay required needed necessary optional missing empty invalid valid expired reset
    changed saved stored set written encrypted hashed protected forgotten lost case
    sensitive being in on at for to of with from by about what which where when how
    why who something anything nothing everything here there now again already known
    unknown new old blank default different hidden shown visible manager managers
    and or but if then because please thanks updated
    return none null nil true false self this undefined await yield lambda def function
    var let const input field column nowhere somewhere anywhere everywhere gone
"""
# code, not a secret: a call or an index, an attribute chain (db.Column), a variable
# (hashed_password): read so only when assigned unquoted with "=" (password =
# data.get(...)); after a colon it is said ("wifi password: blue_sky_42")
_CODE = re.compile(r".*[()\[\]{}].*|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|[a-z]+(?:_[a-z0-9]+)+")
_TAG = re.compile(r"</?[A-Za-z]")
_PLACEHOLDER = re.compile(r"\{.*|%[sd]|\$\{?\w+\}?")  # a template's: f"{x}", %s, $PW
_NOT_A_VALUE = frozenset(_COMMON_WORDS.split())


def halfwidth(text: str) -> str:
    """``text`` with its full-width ASCII forms as ASCII, one character for one (every
    offset stays): ``卡号４１１１`` is ``卡号4111``."""
    return text.translate(_HALFWIDTH)


def cjk_blanked(text: str) -> str:
    """:func:`halfwidth`'s ``text`` with every other CJK character replaced by a space."""
    return _CJK.sub(" ", halfwidth(text))


def blanked(text: str, findings: list[Finding]) -> str:
    """``text`` with the spans of ``findings`` as spaces (offsets unchanged)."""
    parts: list[str] = []
    at = 0
    for f in sorted(findings):
        start = max(f.start, at)
        if f.end > start:
            parts += [text[at:start], " " * (f.end - start)]
            at = f.end
    return "".join(parts) + text[at:]


def _stated(text: str, pattern: re.Pattern[str]) -> list[Finding]:
    found = []
    for m in pattern.finditer(text):
        value = m.group("value")
        cut = len(value) - len(value.rstrip(_TRAILING))
        start, end = m.start("value"), m.end("value") - cut
        value = value[:end - start]
        if "pin" in pattern.groupindex and m.group("pin") and not value.isdigit():
            continue  # a PIN is digits ("a pin on your bag. Is Spider-Man ..." is no PIN)
        if ("assign" in pattern.groupindex and m.group("assign") and not m.group("quote")
                and _CODE.fullmatch(value)):
            continue  # assigned in code: an expression, not a literal
        if _TAG.match(value) or _PLACEHOLDER.fullmatch(value):
            continue  # markup after a label ("Password:</label>"), a template's placeholder
        if end > start and value.lower() not in _NOT_A_VALUE:
            found.append(Finding(start, end, Kind.SECRET))
    return found


def credentials(text: str) -> list[Finding]:
    """API keys, tokens, private key blocks and URLs' passwords of the forms above
    (read in :func:`cjk_blanked`'s view: ``密钥sk-…`` is a key), and passwords or
    PINs stated as such."""
    view, half = cjk_blanked(text), halfwidth(text)
    found = [Finding(m.start(), m.end(), Kind.SECRET)
             for pattern in _KEYS for m in pattern.finditer(view)]
    found += [Finding(m.start("value"), m.end("value"), Kind.SECRET)
              for m in _URL_PASSWORD.finditer(view)
              if not (_PLACEHOLDER.fullmatch(m.group("value"))
                      or _MASKED.fullmatch(m.group("value")))]
    return found + _stated(half, _STATED_EN) + _stated(half, _STATED_ZH)
