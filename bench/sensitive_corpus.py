"""Writes the labelled corpus of sensitive content, tests/data/sensitive_corpus.jsonl.

    .venv/bin/python bench/sensitive_corpus.py      # rewrites the file (seeded: the same file)
    .venv/bin/python bench/sensitive_corpus.py --seed 7 --out /tmp/other.jsonl  # fresh values

One JSON object a line: ``text``, ``lang`` (``en`` | ``zh``), ``spans`` (each
``{"kind", "text"}``: the kind and the exact substring expected, which occurs
once in the text; none for a negative) and ``note`` (what the line tests).
The values are made from each kind's specification, not from the detector:
card numbers by issuer prefix, length and the Luhn digit; IBANs by each
country's BBAN layout and the ISO 13616 mod-97 check; US SSNs by the SSA's
valid areas, groups and serials; UK NINOs by HMRC's prefix rules; Chinese
resident ids by GB 11643 (region, birth date, MOD 11-2); phone numbers in the
national formats of the US, UK and mainland China; key formats as their
issuers publish them. Near misses are numbers of the same shape that fail the
rule (a wrong check digit, a date that does not exist) and the numbers chat is
full of: orders, dates, times, prices, tracking numbers, versions, hashes,
UUIDs, ISBNs.
"""

from __future__ import annotations

import argparse
import json
import random
import string
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "sensitive_corpus.jsonl"
rng = random.Random(44)
rows: list[dict[str, object]] = []


def add(text: str, lang: str, note: str, *spans: tuple[str, str]) -> None:
    for _, value in spans:
        assert text.count(value) == 1, (text, value)
    rows.append({"text": text, "lang": lang, "note": note,
                 "spans": [{"kind": k, "text": v} for k, v in spans]})


def digits(n: int) -> str:
    return "".join(rng.choice(string.digits) for _ in range(n))


# ---------------------------------------------------------------- cards
def luhn_digit(body: str) -> str:
    total = 0
    for i, d in enumerate(reversed(body)):
        x = int(d) * (2 if i % 2 == 0 else 1)
        total += x - 9 if x > 9 else x
    return str((10 - total % 10) % 10)


def card(prefix: str, length: int, valid: bool = True) -> str:
    body = prefix + digits(length - len(prefix) - 1)
    check = luhn_digit(body)
    if not valid:
        check = str((int(check) + rng.randint(1, 9)) % 10)
    return body + check


def grouped(number: str, sep: str, sizes: tuple[int, ...] = (4, 4, 4, 4)) -> str:
    out, at = [], 0
    for size in sizes:
        out.append(number[at:at + size])
        at += size
    if at < len(number):
        out.append(number[at:])
    return sep.join(p for p in out if p)


ISSUERS = [("4", 16), ("51", 16), ("55", 16), ("2221", 16), ("37", 15), ("6011", 16),
           ("62", 16), ("4", 16), ("53", 16), ("34", 15)]
EN_CARD = ["My card number is {}, expiry 08/27.", "Charge it to {} please.",
           "The Visa I use for groceries is {}.", "Use card {} for the hotel deposit.",
           "I paid with {} and the receipt says approved.", "Card: {} (the blue one).",
           "Can you remember my Amex {} for next time?", "{} is my business card number."]
ZH_CARD = ["我的银行卡号是{}，有效期到27年。", "信用卡{}帮我记一下。", "用这张卡{}付房费。",
           "卡号：{}", "我常用的招行卡是{}", "请把{}设为默认支付卡。"]


def cards() -> None:
    for i, (prefix, length) in enumerate(ISSUERS * 3):
        number = card(prefix, length)
        sep = ["", " ", "-"][i % 3]
        shown = grouped(number, sep, (4, 6, 5) if length == 15 else (4, 4, 4, 4)) if sep else number
        if i < 18:
            add(EN_CARD[i % len(EN_CARD)].format(shown), "en", "card", ("card", shown))
        else:
            add(ZH_CARD[i % len(ZH_CARD)].format(shown), "zh", "card", ("card", shown))
    for i in range(8):
        bad = grouped(card("4", 16, valid=False), " " if i % 2 else "")
        template = ["My card number is {} I think.", "卡号是{}吗？"][i % 2]
        add(template.format(bad), ["en", "zh"][i % 2], "card number failing Luhn")


# ---------------------------------------------------------------- IBANs
def iban(country: str, bban: str, valid: bool = True) -> str:
    moved = bban + country + "00"
    number = int("".join(str(int(c, 36)) for c in moved))
    check = 98 - number % 97
    if not valid:
        check = (check + rng.randint(1, 50)) % 97 + 2
    return f"{country}{check:02d}{bban}"


def letters(n: int) -> str:
    return "".join(rng.choice(string.ascii_uppercase) for _ in range(n))


BBANS = {"DE": lambda: digits(18), "GB": lambda: letters(4) + digits(14),
         "NL": lambda: letters(4) + digits(10), "ES": lambda: digits(20),
         "FR": lambda: digits(10) + digits(11) + digits(2), "IT": lambda: letters(1) + digits(22),
         "BE": lambda: digits(12), "CH": lambda: digits(17)}
EN_IBAN = ["Send the rent to {} by Friday.", "My IBAN is {}.", "Salary goes into {} now.",
           "Refund to account {} please."]
ZH_IBAN = ["我的德国账户IBAN是{}。", "房租转到{}就行。", "退款请打到{}这个账户。"]


def ibans() -> None:
    for i, country in enumerate(list(BBANS) * 2):
        number = iban(country, BBANS[country]())
        shown = " ".join(number[j:j + 4] for j in range(0, len(number), 4)) if i % 2 else number
        if i < 10:
            add(EN_IBAN[i % len(EN_IBAN)].format(shown), "en", "iban", ("iban", shown))
        else:
            add(ZH_IBAN[i % len(ZH_IBAN)].format(shown), "zh", "iban", ("iban", shown))
    for country in ("DE", "GB", "NL", "FR"):
        add(f"Is {iban(country, BBANS[country](), valid=False)} the right IBAN?", "en",
            "IBAN failing the mod-97 check")


# ---------------------------------------------------------------- e-mail
EMAILS = ["maria.gonzalez@gmail.com", "j.smith+travel@outlook.co.uk", "li_wei@163.com",
          "zhangsan@qq.com", "team-lead@acme-corp.io", "o.brien@uni-heidelberg.de",
          "wangfang1988@sina.cn", "support@acme-mail.org", "k.tanaka@yahoo.co.jp",
          "dev.ops@startup.ai", "chen.jie@foxmail.com", "a.b@c-d.net"]
EN_MAIL = ["You can reach me at {}.", "My email is {} if the form asks.",
           "Forward the tickets to {} please.", "Contact: {}"]
ZH_MAIL = ["我的邮箱是{}，有事发邮件。", "发到{}就行", "联系邮箱：{}"]


def emails() -> None:
    for i, address in enumerate(EMAILS + EMAILS[:6]):
        if i < 12:
            add(EN_MAIL[i % len(EN_MAIL)].format(address), "en", "email", ("email", address))
        else:
            add(ZH_MAIL[i % len(ZH_MAIL)].format(address.replace("@", "@", 1)), "zh", "email",
                ("email", address))
    for text in ("Follow me @maria_g on Instagram.", "The meeting is at 3@the office, room 2.",
                 "My handle is li.wei at work.", "Use the @here mention in Slack.",
                 "我的微博是@小王同学", "email me later about it"):
        add(text, "zh" if "我" in text else "en", "not an e-mail address")


# ---------------------------------------------------------------- phones
US_AREAS = ["415", "212", "312", "617", "206", "512", "303", "702"]
CN_MOBILE = ["138", "139", "186", "135", "150", "177", "199", "152"]


def phones() -> None:
    en = ["Call me at {} after six.", "My cell is {}.", "Text {} when you land.",
          "The dentist's number is {}.", "Reach me on {}."]
    zh = ["我的手机号是{}，随时打。", "有事打{}", "电话：{}", "加我微信，就是手机号{}。",
          "座机{}，工作日在。"]
    shown_en = []
    for area in US_AREAS:
        local = f"{rng.randint(2, 9)}{digits(2)}"
        line = digits(4)
        shown_en.append(rng.choice([f"({area}) {local}-{line}", f"{area}-{local}-{line}",
                                    f"+1 {area} {local} {line}", f"{area}.{local}.{line}"]))
    shown_en += ["+44 20 7946 0958", "07700 900461", "+44 7911 123456", "020 7946 0321",
                 "+49 30 901820", "+33 1 42 68 53 00"]
    for i, number in enumerate(shown_en):
        add(en[i % len(en)].format(number), "en", "phone", ("phone", number))
    shown_zh = []
    for prefix in CN_MOBILE:
        body = prefix + digits(8)
        shown_zh.append(rng.choice([body, f"{body[:3]} {body[3:7]} {body[7:]}",
                                    f"+86 {body}", f"{body[:3]}-{body[3:7]}-{body[7:]}"]))
    shown_zh += ["010-65529988", "021-64378821", "0755-86013388", "+86 10 6552 9988"]
    for i, number in enumerate(shown_zh):
        add(zh[i % len(zh)].format(number), "zh", "phone", ("phone", number))


# ---------------------------------------------------------------- national ids
def ssn() -> str:
    area = rng.choice([n for n in range(1, 900) if n != 666])
    return f"{area:03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"


NINO_FIRST = "ABCEGHJKLMNOPRSTWXYZ"
NINO_SECOND = "ABCEGHJKLMNPRSTWXYZ"


def nino() -> str:
    while True:
        prefix = rng.choice(NINO_FIRST) + rng.choice(NINO_SECOND)
        if prefix not in {"BG", "GB", "NK", "KN", "TN", "NT", "ZZ"}:
            break
    return f"{prefix} {digits(2)} {digits(2)} {digits(2)} {rng.choice('ABCD')}"


REGIONS_CN = ["110101", "310104", "440305", "510107", "320102", "330106", "420111", "610113"]
WEIGHTS = [pow(2, 17 - i, 11) for i in range(17)]


def resident_id(valid: bool = True, real_date: bool = True) -> str:
    year = rng.randint(1950, 2005)
    month, day = rng.randint(1, 12), rng.randint(1, 28)
    if not real_date:
        month, day = 2, 30
    body = f"{rng.choice(REGIONS_CN)}{year}{month:02d}{day:02d}{digits(3)}"
    check = "10X98765432"[sum(int(d) * w for d, w in zip(body, WEIGHTS, strict=True)) % 11]
    if not valid:
        check = rng.choice([c for c in "0123456789X" if c != check])
    return body + check


def national_ids() -> None:
    en_ssn = ["My SSN is {}.", "Social security number {} for the tax form.",
              "Put {} as my social on the lease."]
    for i in range(9):
        value = ssn()
        add(en_ssn[i % 3].format(value), "en", "US SSN", ("national_id", value))
    en_nino = ["My national insurance number is {}.", "NI number: {}",
               "HMRC has me as {}."]
    for i in range(9):
        value = nino()
        add(en_nino[i % 3].format(value), "en", "UK NINO", ("national_id", value))
    zh_id = ["我的身份证号是{}。", "身份证：{}，订票用。", "帮我记住证件号{}",
             "这是我妈的身份证号码{}。"]
    en_id = ["My Chinese ID card number is {}.", "Resident ID {} for the visa form."]
    for i in range(12):
        value = resident_id()
        if i % 5 == 0:
            value = value[:-1] + "X" if value.endswith("X") else value
        if i < 9:
            add(zh_id[i % len(zh_id)].format(value), "zh", "Chinese resident id",
                ("national_id", value))
        else:
            add(en_id[i % 2].format(value), "en", "Chinese resident id", ("national_id", value))
    for i in range(6):
        add(["身份证号{}好像输错了", "订单号{}已发货"][i % 2].format(resident_id(valid=False)),
            "zh", "18 digits failing the MOD 11-2 check")
    for _ in range(3):
        add(f"证件号{resident_id(real_date=False)}系统说无效", "zh",
            "18 digits with a birth date that does not exist")


# ---------------------------------------------------------------- credentials
def alnum(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def b64url(n: int) -> str:
    return alnum(n, string.ascii_letters + string.digits + "-_")


def credentials() -> None:
    upper = string.ascii_uppercase + string.digits
    keys = [
        "AKIA" + alnum(16, upper), "ASIA" + alnum(16, upper),
        "ghp_" + alnum(36), "gho_" + alnum(36), "github_pat_" + alnum(22) + "_" + alnum(59),
        "xoxb-" + digits(12) + "-" + digits(13) + "-" + alnum(24, string.ascii_lowercase),
        "xoxp-" + digits(11) + "-" + digits(12) + "-" + digits(13) + "-"
        + alnum(32, "0123456789abcdef"),
        "sk_live_" + alnum(24), "rk_live_" + alnum(24), "sk_test_" + alnum(24),
        "sk-" + alnum(20) + "T3BlbkFJ" + alnum(20),
        "sk-proj-" + b64url(74) + "T3BlbkFJ" + b64url(74),
        "sk-" + alnum(48), "sk-ant-api03-" + b64url(93) + "AA",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ" + b64url(40) + "." + b64url(43),
        "eyJhbGciOiJSUzI1NiJ9.eyJ" + b64url(60) + "." + b64url(86),
    ]
    en = ["Here is the key: {}", "Our deploy token is {} (don't share).",
          "Set OPENAI_KEY={} in the env.",
          "I pasted {} into the config by mistake.", "the bot uses {}"]
    zh = ["这是我的密钥{}，帮我保存一下", "token是 {} 别外传", "API key：{}"]
    for i, key in enumerate(keys):
        if i % 4 == 3:
            add(zh[i % 3].format(key), "zh", "key or token", ("secret", key))
        else:
            add(en[i % len(en)].format(key), "en", "key or token", ("secret", key))
    for header in ("RSA PRIVATE KEY", "OPENSSH PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY"):
        block = (f"-----BEGIN {header}-----\n{b64url(64)}\n{b64url(64)}\n{b64url(20)}==\n"
                 f"-----END {header}-----")
        add(f"This is my server key, keep it:\n{block}\nthanks", "en", "private key block",
            ("secret", block))
    stated_en = [("My password is {}.", "hunter2!"), ("the wifi password is {}", "Sunflower88"),
                 ("Password: {}", "Tr0ub4dor&3"), ("my bank PIN is {}", "4821"),
                 ("The password for the NAS is {} btw", "qwerty123"),
                 ("my gmail password was {} before I changed it", "correcthorse"),
                 ("pin code is {}, don't forget", "0917"),
                 ("My netflix password is '{}'", "movienight2024"),
                 ("the passcode to the garage = {}", "7733#")]
    for template, value in stated_en:
        add(template.format(value), "en", "password stated as such", ("secret", value))
    stated_zh = [("我的密码是{}，记一下", "abc123456"), ("WiFi密码：{}", "88889999"),
                 ("支付密码是{}别告诉别人", "135790"), ("银行卡密码为{}。", "520131"),
                 ("邮箱密码改成了{}", "Qwe@2024"), ("登录密码：{} 记住了吗", "Lw19900315"),
                 ("公司VPN的口令是{}", "Vpn!Secure7")]
    for template, value in stated_zh:
        add(template.format(value), "zh", "password stated as such", ("secret", value))
    for text, lang in [
        ("My password is wrong again, can you help me reset it?", "en"),
        ("The password is too short according to the site.", "en"),
        ("I forgot my password for the gym app.", "en"),
        ("Reset your password from the settings page.", "en"),
        ("My password is the same as before, I think.", "en"),
        ("The PIN is required at checkout.", "en"),
        ("密码是什么来着？我忘了", "zh"), ("密码忘了，怎么找回？", "zh"), ("请输入六位密码", "zh"),
        ("The commit is 9fceb02d0ae598e95dc970b74767f19372d61af8.", "en"),
        ("sha256 of the file: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
         "en"),
        ("I installed scikit-learn and sk-video yesterday.", "en"),
        ("The session token expired after an hour.", "en"),
        ("Request id 3f2504e0-4f89-11d3-9a0c-0305e82c3301 failed.", "en"),
        ("Build ID: a1b2c3d4e5f6a7b8c9d0", "en"),
        ("版本号是v2.10.4，哈希7c4a8d09ca3762af61e59520943dc26494f8941b", "zh"),
    ]:
        add(text, lang, "not a credential")


# ---------------------------------------------------------------- IP addresses
def ips() -> None:
    en = ["The NAS is at {} on my home network.", "Our VPN server is {}.",
          "ssh into {} to check the logs.", "My public IP was {} this morning."]
    values = ["192.168.1.23", "10.0.4.17", "172.16.254.1", "8.8.4.4", "203.0.113.54",
              "2001:db8:85a3::8a2e:370:7334", "fe80::1ff:fe23:4567:890a", "93.184.216.34"]
    for i, value in enumerate(values):
        add(en[i % len(en)].format(value), "en", "IP address", ("ip", value))
    for value in ("192.168.0.1", "47.96.12.201"):
        add(f"服务器地址是{value}，端口8080", "zh", "IP address", ("ip", value))


# ---------------------------------------------------------------- names and places
def names() -> None:
    rows_en = [
        ("I had lunch with {} yesterday.", "Maria Gonzalez", None),
        ("{} is my sister's husband.", "David Thompson", None),
        ("My manager {} wants the report by Monday.", "Jennifer Walsh", None),
        ("Tell {} I said hi.", "Robert Chen", None),
        ("We watched a film with {} and her kids.", "Sarah Miller", None),
        ("My dentist, Dr. {}, moved her office.", "Emily Carter", None),
        ("{} called about the wedding plans.", "Michael Johnson", None),
        ("I'm meeting {} for coffee tomorrow.", "Priya Patel", None),
        ("Our neighbour {} lent us a ladder.", "Tom Anderson", None),
        ("{} recommended that book to me.", "Laura Bennett", None),
        ("My grandmother {} turns ninety this year.", "Margaret Wilson", None),
        ("I went hiking with {} last weekend.", "James O'Connor", None),
        ("{} from accounting retired in June.", "Patricia Hughes", None),
        ("Can you send the photos to {}?", "Christopher Lee", None),
        ("My son's teacher, {}, emailed me.", "Rachel Green", None),
        ("I've known {} since high school.", "Steven Murphy", None),
        ("{} is coaching the team this season.", "Angela Rodriguez", None),
        ("The landlord, {}, fixed the heater.", "George Harris", None),
        ("We're naming the baby after {}.", "Eleanor Roosevelt", None),
        ("My therapist {} suggested journaling.", "Hannah Brooks", None),
        ("{} and I split the bill.", "Kevin Nguyen", None),
        ("I borrowed the car from {} again.", "Olivia Martin", None),
        ("We're driving to {} for Thanksgiving.", None, "Ohio"),
        ("My cousin lives in {} now.", None, "Melbourne"),
        ("We flew to {} for the conference.", None, "Chicago"),
        ("My parents still live in {}.", None, "Manchester"),
        ("I grew up near {} before moving.", None, "Lake Tahoe"),
        ("Next summer we're going to {}.", None, "Portugal"),
        ("She moved from {} last year.", None, "Toronto"),
        ("We got married in {}.", None, "Barcelona"),
        ("The office is relocating to {}.", None, "Austin"),
        ("I spent a semester in {}.", None, "Japan"),
    ]
    for template, name, place in rows_en:
        if name:
            add(template.format(name), "en", "person name", ("name", name))
        else:
            assert place
            add(template.format(place), "en", "place", ("location", place))
    add("I met Kevin Brooks in Denver at the trade fair.", "en", "name and place",
        ("name", "Kevin Brooks"), ("location", "Denver"))
    add("Anna Schmidt flew in from Berlin on Tuesday.", "en", "name and place",
        ("name", "Anna Schmidt"), ("location", "Berlin"))
    add("Call Daniel Park when you reach Seattle.", "en", "name and place",
        ("name", "Daniel Park"), ("location", "Seattle"))
    for text, span in [("我和王芳昨天一起吃饭了。", ("name", "王芳")),
                       ("张伟是我的大学室友。", ("name", "张伟")),
                       ("我们下个月去杭州玩。", ("location", "杭州")),
                       ("我爸妈住在成都。", ("location", "成都"))]:
        add(text, "zh", "Chinese name or place (no Chinese NER)", span)


# ---------------------------------------------------------------- near misses
def near_misses() -> None:
    en = [
        "My order number is 112-4938271-5532019, it ships Tuesday.",
        "Order #2023110512345 arrived damaged.",
        "Tracking number 1Z999AA10123456784 says out for delivery.",
        "The FedEx tracking is 7489 2034 1122 and it's late.",
        "We met on 2023-11-05 at 14:30.", "The flight leaves 05/12/2024 at 06:45.",
        "It costs $1,299.99 plus $45.50 shipping.", "I paid 4,250.00 EUR for the course.",
        "Upgrade to version 3.8.0 fixed it.", "Running Python 3.11.7 and node v20.10.0.",
        "The ISBN is 978-0-306-40615-7.", "ISBN 9780306406157 is the second edition.",
        "My flight is UA 857 seat 32C.", "Room 1204, building 7, floor 12.",
        "The meeting is at 10:45 and lasts 90 minutes.", "I ran 5.2 km in 27:14 today.",
        "The invoice INV-2024-000873 is due on the 30th.",
        "My student number is 20231458 at the university.",
        "Population grew from 1,234,567 to 1,456,789.", "The ratio was 3.14159265358979.",
        "UUID 123e4567-e89b-12d3-a456-426614174000 is the job.",
        "Zip code 94107, apartment 3B.", "The year 1987 was a good one.",
        "Item SKU 4006381333931 is out of stock.", "Score was 21-14 in the second half.",
        "Call me in 15 minutes, I'm busy.", "My phone battery is at 12%.",
        "I have 3 kids and 2 dogs.", "The model number is XPS-9520-7781.",
        "Lot number 20240315-0042 was recalled.", "Bus 38 comes every 12 minutes.",
        "She scored 1450 on the SAT in 2019.", "The temperature hit 38.5 degrees.",
        "Version 1.2.3.4 of the firmware bricked it.",
        "My reference code is ABC-12345-XYZ.", "Patch notes for 2024.11.02 are out.",
        "Gate B22, boarding at 7:10 pm.", "The serial on the back is SN 4820 1937 5561.",
        "I'm reading page 384 of 1,024.",
    ]
    zh = [
        "订单号2023110512345678已经发货了。", "快递单号SF1403285920347还没到。",
        "我们2023年11月5日下午3点见。", "价格是¥1299，打折后999元。", "航班CA1831明早7:45起飞。",
        "版本3.8.0修复了这个问题。", "发票号码04400180011112345678。", "房间号1204，在12楼。",
        "会议定在14:30到16:00。", "学号2019301234，计算机学院。",
        "这本书的ISBN是978-7-111-54742-6。",
        "京东订单号 284937561029 已签收。", "工号00731，部门是研发。", "他跑了42.195公里。",
        "车牌号京A·12345，白色的。", "我家邮编是100080。", "今年是2024年，我36岁。",
        "银行流水号20240315093012345678901", "取件码 8-3-2041", "第3期分期还款1,580.00元。",
    ]
    for text in en:
        add(text, "en", "near miss: a number that is none of the kinds")
    add("Coordinates 37.7749, -122.4194 are San Francisco's.", "en",
        "near miss beside a place", ("location", "San Francisco"))
    for text in zh:
        add(text, "zh", "near miss: a number that is none of the kinds")


def mixed() -> None:
    address, phone = "ana.lopez@gmail.com", "(312) 846-0148"
    add(f"Ana Lopez here: {address} or {phone}.", "en", "two kinds",
        ("name", "Ana Lopez"), ("email", address), ("phone", phone))
    number = card("4", 16)
    add(f"Book it on {number} and send the receipt to mark@fastmail.com.", "en", "two kinds",
        ("card", number), ("email", "mark@fastmail.com"))
    value = resident_id()
    add(f"身份证{value}，手机13912345678，订酒店用。", "zh", "two kinds",
        ("national_id", value), ("phone", "13912345678"))
    account = iban("DE", BBANS["DE"]())
    add(f"转账到{account}，有问题发邮件到liu.yang@126.com", "zh", "two kinds",
        ("iban", account), ("email", "liu.yang@126.com"))
    key = "ghp_" + alnum(36)
    add(f"Token {key} and the DB at 10.2.3.4, password is Spring2024!", "en", "three kinds",
        ("secret", key), ("ip", "10.2.3.4"), ("secret", "Spring2024!"))
    for text, spans in [
        ("我的邮箱是wangwei88@qq.com，电话15800001111。", (("email", "wangwei88@qq.com"),
                                                        ("phone", "15800001111"))),
        ("WiFi密码：coffee2023，地址是192.168.31.1", (("secret", "coffee2023"),
                                                   ("ip", "192.168.31.1"))),
    ]:
        add(text, "zh", "two kinds", *spans)


# ---------------------------------------------------------------- evasions
ZWSP, ZWJ, WJ, SHY = "\u200b", "\u200d", "\u2060", "\u00ad"


def evasions() -> None:
    """What a hostile review wrote to slip past the detector, and near misses of it."""
    number = card("4", 16)
    add(f"My card is {grouped(number, '.')} if you need it.", "en", "card with dots",
        ("card", grouped(number, ".")))
    number = card("51", 16)
    add(f"Card number {grouped(number, '/')} for the booking.", "en", "card with slashes",
        ("card", grouped(number, "/")))
    number = card("6011", 16)
    broken = f"{number[:4]} {number[4:8]}\n{number[8:12]} {number[12:]}"
    add(f"card:\n{broken}\nexp 09/28", "en", "card across a line break", ("card", broken))
    number = card("4", 16)
    hidden = ZWSP.join(number[i:i + 4] for i in range(0, 16, 4))
    add(f"Pay with {hidden} tonight.", "en", "card with zero-width spaces", ("card", hidden))
    number = card("62", 16)
    add(f"卡号是{grouped(number, '.')}，别外传", "zh", "card with dots",
        ("card", grouped(number, ".")))
    add(f"My card is {grouped(card('4', 16, valid=False), '.')} I think.", "en",
        "card with dots failing Luhn")
    add("The years were 1999\n2000\n2001\n2002 in that order.", "en",
        "lines of numbers, not a card")
    for country in ("DE", "NL"):
        number = iban(country, BBANS[country]()).lower()
        shown = " ".join(number[j:j + 4] for j in range(0, len(number), 4))
        add(f"my iban is {shown}, thanks", "en", "IBAN in lower case", ("iban", shown))
    number = iban("GB", BBANS["GB"]()).lower()
    add(f"转账到{number}就行", "zh", "IBAN in lower case", ("iban", number))
    add(f"is {iban('DE', BBANS['DE'](), valid=False).lower()} right?", "en",
        "IBAN in lower case failing the mod-97 check")
    bare = ssn().replace("-", "")
    add(f"My SSN is {bare}, for the W-2.", "en", "US SSN stated, no dashes",
        ("national_id", bare))
    bare = ssn().replace("-", "")
    add(f"我的社会安全号是{bare}", "zh", "US SSN stated, no dashes", ("national_id", bare))
    add(f"Order {ssn().replace('-', '')} shipped on Monday.", "en",
        "nine digits not stated as an SSN")
    value = resident_id()
    grouped_id = f"{value[:6]} {value[6:14]} {value[14:]}"
    add(f"身份证号 {grouped_id} 订票用", "zh", "Chinese resident id grouped",
        ("national_id", grouped_id))
    value = resident_id()
    hidden = value[:9] + SHY + value[9:]
    add(f"身份证{hidden}，别外传", "zh", "Chinese resident id with a soft hyphen",
        ("national_id", hidden))
    for text, value in [("You can reach me at maria.g(at)gmail.com.", "maria.g(at)gmail.com"),
                        ("mail: tom [at] outlook [dot] com", "tom [at] outlook [dot] com"),
                        ("it's jlee at yahoo dot co dot uk if you need me",
                         "jlee at yahoo dot co dot uk"),
                        (f"Email me: ana{ZWSP}.ruiz@gmail.com", f"ana{ZWSP}.ruiz@gmail.com")]:
        add(text, "en", "obfuscated e-mail address", ("email", value))
    add("邮箱 wang.fang(at)163.com 有事联系", "zh", "obfuscated e-mail address",
        ("email", "wang.fang(at)163.com"))
    for text in ("I work at google.com now.", "Look at example dot com for the docs.",
                 "We met at noon at the cafe.",
                 "Clone git@github.com:acme/api.git first.",
                 "Upgrade to version 2.4.1.0 tonight.",
                 "The DB is postgres://localhost:5432/app on my laptop."):
        add(text, "en", "near miss: no address, no credential")
    for template, host in (("DATABASE_URL=postgres://app:{}@db.internal:5432/app", ""),
                           ("mysql://root:{}@10.0.0.7:3306/shop is the shop's database",
                            "10.0.0.7"),
                           ("连接串 mongodb+srv://admin:{}@cluster0.mongodb.net/prod", ""),
                           ("cache at redis://:{}@cache:6379/0", "")):
        value = alnum(14)
        spans = [("secret", value)] + ([("ip", host)] if host else [])
        add(template.format(value), "zh" if "连接" in template else "en",
            "password in a connection string", *spans)
    for key in ("AIza" + b64url(35), "glpat-" + b64url(20)):
        add(f"the key is {key}, keep it safe", "en", "key or token", ("secret", key))
    key = "ghp_" + alnum(36)
    hidden = key[:8] + ZWJ + key[8:]
    add(f"my token {hidden} please", "en", "key with a zero-width joiner", ("secret", hidden))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=44, help="another seed: other values")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    rng.seed(args.seed)
    for section in (cards, ibans, emails, phones, national_ids, credentials, ips, names,
                    mixed, near_misses, evasions):
        section()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(rows)} sentences -> {args.out}")


if __name__ == "__main__":
    main()
