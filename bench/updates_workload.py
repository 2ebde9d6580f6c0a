"""The generated workload of ``bench/updates.py``: facts, later corrections, and
later statements that must not replace anything.

Each user states one fact per subject in a first session (home, job, employer,
diet, relationship, pet, preference), between small talk; later sessions bring,
per subject, either a **correction** (the fact changed, said one of many ways) or
a **non-correction** (a related statement that leaves the fact true: a visit, a
friend's move, an addition, the same fact again). Users speak English or
Chinese. Every phrasing is a template with an id; about a third of them are
marked ``held_out``: they were not looked at while the rules were written, and
the benchmark reports them apart.

Everything is drawn from one seeded generator, so a run is repeatable.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

Lang = Literal["en", "zh"]
CaseKind = Literal["correction", "other"]


@dataclass(frozen=True)
class Template:
    id: str
    text: str
    held_out: bool = False


def _t(spec: str) -> Template:
    """``"id | text"``; an id ending in ``*`` is held out."""
    ident, text = (s.strip() for s in spec.split("|", 1))
    return Template(ident.rstrip("*"), text, ident.endswith("*"))


@dataclass(frozen=True)
class Subject:
    name: str
    values: dict[Lang, list[str]]
    facts: dict[Lang, list[Template]]  # the first statement, {old}
    corrections: dict[Lang, list[Template]]  # {old} -> {new}
    others: dict[Lang, list[Template]]  # must not replace {old}; may name {new}


def _subject(name: str, values: dict[Lang, list[str]], facts: dict[Lang, list[str]],
             corrections: dict[Lang, list[str]], others: dict[Lang, list[str]]) -> Subject:
    def conv(d: dict[Lang, list[str]]) -> dict[Lang, list[Template]]:
        return {lang: [_t(s) for s in specs] for lang, specs in d.items()}
    return Subject(name, values, conv(facts), conv(corrections), conv(others))


SUBJECTS: list[Subject] = [
    _subject(
        "home",
        {"en": ["Porto", "Lisbon", "Berlin", "Madrid", "Oslo", "Vienna", "Prague", "Dublin",
                "Athens", "Warsaw", "Seattle", "Denver", "Toronto", "Kyoto", "Nairobi"],
         "zh": ["北京", "上海", "广州", "深圳", "杭州", "成都", "南京", "武汉", "西安", "重庆"]},
        {"en": ["live | I live in {old}.", "based | I'm based in {old}.",
                "living* | I'm living in {old} these days."],
         "zh": ["live | 我住在{old}。", "now* | 我现在住在{old}。"]},
        {"en": ["now | I live in {new} now.", "actually | Actually, I live in {new}.",
                "moved_to | I moved to {new}.", "actually_moved | Actually I moved to {new}.",
                "no_longer | I no longer live in {old}; I live in {new} now.",
                "from_to | I've moved from {old} to {new}.",
                "changed | I changed my address, I now live in {new}.",
                "not_anymore* | I don't live in {old} anymore.",
                "relocated* | I relocated to {new} for work.",
                "we_moved* | We moved to {new} last month.",
                "not_anymore_moved* | I'm not living in {old} anymore, I moved to {new}."],
         "zh": ["now | 我现在住在{new}了。", "moved_to | 我搬到{new}了。",
                "actually | 其实我住在{new}。", "from_to | 我从{old}搬到了{new}。",
                "no_longer* | 我已经不住在{old}了，现在住在{new}。",
                "moved_go* | 我上个月搬去{new}了。"]},
        {"en": ["visited | I visited {new} last year.", "friend_moved | My friend moved to {new}.",
                "still | I still live in {old}.", "trip | I'm flying to {new} next week.",
                "sister_lives* | My sister lives in {new}.",
                "used_to* | I used to live in {new}.",
                "parents_moved* | My parents moved to {new} in May."],
         "zh": ["visited | 我去年去过{new}。", "friend_moved | 我朋友搬到{new}了。",
                "sister_lives* | 我姐姐住在{new}。", "trip* | 我下周要去{new}出差。"]},
    ),
    _subject(
        "job",
        {"en": ["nurse", "teacher", "pilot", "chef", "lawyer", "accountant", "engineer",
                "dentist", "architect", "librarian", "pharmacist", "journalist", "electrician",
                "photographer"],
         "zh": ["护士", "老师", "医生", "律师", "工程师", "会计", "厨师", "设计师", "记者",
                "程序员"]},
        {"en": ["work_as | I work as {a_old}.", "im_a | I'm {a_old}.",
                "profession* | I'm {a_old} by profession."],
         "zh": ["yi_ming | 我是一名{old}。", "job_is* | 我的工作是{old}。"]},
        {"en": ["now | I'm {a_new} now.", "actually | Actually, I work as {a_new}.",
                "changed | I changed careers and now work as {a_new}.",
                "switched | I switched careers, I'm {a_new} now.",
                "no_longer | I'm no longer {a_old}; I work as {a_new}.",
                "not_anymore* | I'm not {a_old} anymore.",
                "became* | I became {a_new} this spring.",
                "job_now* | These days I work as {a_new}."],
         "zh": ["now | 我现在是一名{new}了。", "actually | 其实我是一名{new}。",
                "no_longer | 我不再当{old}了，现在是{new}。",
                "changed* | 我换工作了，现在是一名{new}。", "switched* | 我改行当{new}了。"]},
        {"en": ["brother | My brother is {a_new}.", "someday | I'd love to be {a_new} someday.",
                "still | I still work as {a_old}.",
                "past* | I worked as {a_new} in college.",
                "wife* | My wife works as {a_new}."],
         "zh": ["brother | 我哥哥是一名{new}。", "someday | 我想以后当{new}。",
                "past* | 我以前当过{new}。"]},
    ),
    _subject(
        "employer",
        {"en": ["Siemens", "Bosch", "Google", "Microsoft", "Amazon", "IBM", "Spotify", "Airbus",
                "Nokia", "Philips", "SAP", "Adidas", "Lufthansa", "Deloitte"],
         "zh": ["腾讯", "阿里巴巴", "华为", "百度", "字节跳动", "京东", "小米", "美团", "网易",
                "联想"]},
        {"en": ["work_at | I work at {old}.", "work_for | I work for {old}.",
                "been_working* | I've been working at {old} for three years."],
         "zh": ["work_at | 我在{old}工作。", "shang_ban* | 我在{old}上班。"]},
        {"en": ["actually_now | Actually I work at {new} now.",
                "now | I work for {new} now.",
                "switched_jobs | I switched jobs, I work at {new} now.",
                "switched_from | I switched from {old} to {new}.",
                "no_longer | I no longer work at {old}.",
                "changed | I changed jobs and now work for {new}.",
                "joined* | I joined {new} last month.",
                "not_anymore* | I don't work for {old} anymore, I'm at {new} now.",
                "left* | I left {old} and joined {new}."],
         "zh": ["now | 我现在在{new}工作了。", "switched | 我跳槽到{new}了。",
                "from_to | 我从{old}跳槽到了{new}。",
                "no_longer* | 我已经不在{old}上班了。", "actually* | 其实我在{new}上班。"]},
        {"en": ["brother | My brother works at {new}.",
                "meeting | I had a meeting with people from {new} today.",
                "still | I still work at {old}.",
                "wife* | My wife works for {new}.", "used_to* | I used to work at {new}.",
                "client* | I work with {new} as a client."],
         "zh": ["brother | 我哥哥在{new}工作。", "meeting | 我今天去{new}开会了。",
                "intern* | 我以前在{new}实习过。"]},
    ),
    _subject(
        "diet",
        {"en": ["vegetarian", "vegan", "pescatarian"],
         "zh": ["吃素", "吃纯素"]},
        {"en": ["im | I'm {old}.", "im_a | I'm {a_old}.", "been* | I've been {old} for years."],
         "zh": ["eat | 我{old}。", "always* | 我一直{old}。"]},
        {"en": ["now | I'm {new} now.", "actually | Actually, I'm {new}.",
                "not_anymore | I'm not {old} anymore.", "no_longer | I'm no longer {old}.",
                "changed | I changed my diet, I'm {new} now.",
                "switched* | I switched to {a_new} diet.",
                "meat_again* | I eat meat again.",
                "stopped* | I stopped being {old} last year."],
         "zh": ["now | 我现在{new}了。", "not_anymore | 我不{old}了。",
                "meat* | 我开始吃肉了。", "actually* | 其实我{new}。"]},
        {"en": ["wife | My wife is {new}.", "tried | I tried a vegan burger yesterday.",
                "still | I'm still {old}.",
                "lactose* | I'm also lactose intolerant.",
                "daughter* | My daughter became {new}."],
         "zh": ["wife | 我妻子{new}。", "tried* | 我昨天尝了素汉堡。"]},
    ),
    _subject(
        "relationship",
        {"en": ["Anna", "Maria", "Sofia", "Lena", "Clara", "Emma", "Julia", "Nora"],
         "zh": ["小红", "小丽", "小芳", "小美", "小雪", "小静"]},
        {"en": ["single | I'm single.", "girlfriend | My girlfriend is {old}.",
                "partner* | My partner's name is {old}."],
         "zh": ["single | 我单身。", "girlfriend | 我女朋友叫{old}。"]},
        # a template naming {old} goes with a fact naming {old}, the others with "single"
        {"en": ["married_now | I'm married now.", "got_married | I got married last spring.",
                "relationship | Actually, I'm in a relationship now.",
                "girlfriend_now | My girlfriend is {new} now.",
                "not_with | I'm not with {old} anymore.",
                "not_single* | I'm not single anymore.",
                "broke_up* | {old} and I broke up.",
                "engaged* | I'm engaged now."],
         "zh": ["married | 我结婚了。", "broke_up | 我和{old}分手了。",
                "not_single* | 我不再单身了。", "new_girlfriend* | 我现在的女朋友叫{new}。"]},
        {"en": ["sister | My sister got married.", "friend | My best friend is single.",
                "wedding | I went to a wedding last weekend.",
                "hiking* | My girlfriend {old} loves hiking.",
                "cousin* | My cousin is engaged."],
         "zh": ["sister | 我姐姐结婚了。", "friend* | 我朋友单身。"]},
    ),
    _subject(
        "pet",
        {"en": ["Rex", "Max", "Bella", "Luna", "Milo", "Coco", "Buddy", "Daisy"],
         "zh": ["旺财", "豆豆", "球球", "毛毛", "花花", "点点"]},
        {"en": ["dog_named | I have a dog named {old}.", "cat | I have a cat.",
                "got_dog* | I've got a dog called {old}."],
         "zh": ["dog | 我养了一只狗。", "cat | 我有一只猫。"]},
        # the templates name the pet of the fact: {pet} is "dog" or "cat"
        {"en": ["not_anymore | I don't have a {pet} anymore.",
                "no_longer | I no longer have a {pet}.",
                "actually_called | Actually, my {pet} is called {new}.",
                "passed* | My {pet} passed away last month.",
                "gave_away* | We gave our {pet} away.",
                "name_now* | My {pet}'s name is {new} now."],
         "zh": ["not_anymore | 我不养{pet}了。", "died | 我的{pet}去世了。",
                "no_more* | 我已经没有{pet}了。"]},
        {"en": ["also | I also have a {other}.", "neighbour | My neighbour has a {pet}.",
                "walked | I walked my {pet} today.",
                "adopted* | I adopted a {other} too.",
                "vet* | I took my {pet} to the vet."],
         "zh": ["also | 我还养了一只{other}。", "neighbour* | 我邻居养了一只{pet}。"]},
    ),
    _subject(
        "preference",
        {"en": ["blue", "green", "red", "purple", "yellow", "orange", "black", "white"],
         "zh": ["蓝色", "绿色", "红色", "紫色", "黄色", "橙色"]},
        # {drink}: a drink the user likes, {drink2} another
        {"en": ["favourite | My favourite colour is {old}.", "likes | I like {drink}.",
                "favorite* | My favorite color is {old}."],
         "zh": ["favourite | 我最喜欢的颜色是{old}。", "likes | 我喜欢{drink}。"]},
        {"en": ["favourite_now | My favourite colour is {new} now.",
                "actually_favourite | Actually, my favourite colour is {new}.",
                "not_anymore | I don't like {drink} anymore.",
                "switched_from | I switched from {drink} to {drink2}.",
                "changed_mind* | I changed my mind, my favourite colour is {new}.",
                "no_longer* | I no longer enjoy {drink}.",
                "not_into* | I'm not into {drink} anymore."],
         "zh": ["favourite_now | 我现在最喜欢的颜色是{new}。", "no_longer | 我不再喜欢{drink}了。",
                "actually* | 其实我最喜欢的颜色是{new}。",
                "not_anymore* | 我已经不喜欢{drink}了。"]},
        {"en": ["also_like | I also like {drink2}.", "wife_likes | My wife likes {drink2}.",
                "still | I still like {drink}.",
                "too* | I like {drink2} too.",
                "son* | My son's favourite colour is {new}."],
         "zh": ["also | 我也喜欢{drink2}。", "wife* | 我妻子最喜欢的颜色是{new}。"]},
    ),
]
DRINKS: dict[Lang, list[str]] = {
    "en": ["coffee", "tea", "beer", "wine", "hot chocolate", "lemonade", "green tea"],
    "zh": ["咖啡", "茶", "啤酒", "红酒", "可乐", "果汁"],
}
PETS: dict[Lang, dict[str, str]] = {"en": {"dog": "dog", "cat": "cat"},
                                    "zh": {"dog": "狗", "cat": "猫"}}

FILLER_USER: dict[Lang, list[str]] = {
    "en": ["That works for me.", "Sounds good to me.", "OK, thanks!", "Let me think about it.",
           "I'll work on that later.", "Haha, fair enough.", "Good morning!",
           "We're moving the meeting to Friday.", "Live music tonight sounds fun.",
           "I'll get back to you once I'm home.", "Can you help me plan the week?",
           "That doesn't work for me, sorry.", "Nice, the weather is lovely today."],
    "zh": ["好的，谢谢！", "听起来不错。", "我想一想。", "这个可以。", "早上好！",
           "帮我安排一下这周的计划吧。", "今天天气真好。", "那就这样吧。"],
}
FILLER_ASSISTANT: dict[Lang, list[str]] = {
    "en": ["Great, does that work for you?", "Noted! Anything else?", "Happy to help.",
           "Sure, here is a plan for your week.", "Let me know when you're back home.",
           "That sounds lovely.", "Of course, take your time."],
    "zh": ["好的，还有别的吗？", "没问题。", "很高兴能帮上忙。", "好的，这是本周的计划。"],
}


@dataclass(frozen=True)
class Case:
    """One subject of one user: the fact, then what came later."""

    user: str
    subject: str
    lang: Lang
    kind: CaseKind
    template: str  # the later statement's template id
    held_out: bool
    fact_event: str
    later_event: str
    fact_text: str
    later_text: str


@dataclass(frozen=True)
class Message:
    event_id: str
    user: str
    conversation: str
    role: str
    content: str
    created_at: datetime


@dataclass
class Workload:
    messages: list[Message]
    sessions: list[tuple[str, str, str]]  # (user, conversation, last event id), by start
    cases: list[Case]


def _fill(text: str, **values: str) -> str:
    return text.format(**values)


def _a(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def _case_texts(rng: random.Random, subject: Subject, lang: Lang, fact: Template,
                later: Template) -> tuple[str, str]:
    values = subject.values[lang]
    old, new = rng.sample(values, 2)
    drink, drink2 = rng.sample(DRINKS[lang], 2)
    pet = "cat" if fact.id == "cat" else "dog"
    other = "dog" if pet == "cat" else "cat"
    names = {"old": old, "new": new, "a_old": _a(old), "a_new": _a(new), "drink": drink,
             "drink2": drink2, "pet": PETS[lang][pet], "other": PETS[lang][other]}
    return _fill(fact.text, **names), _fill(later.text, **names)


def _fits(subject: Subject, fact: Template, later: Template, correction: bool) -> bool:
    """Whether ``later`` speaks of what ``fact`` says (which preference, which partner,
    a pet with a name or not)."""
    named = "{old}" in fact.text
    if subject.name == "relationship":
        partner = "{old}" in later.text or ("{new}" in later.text and correction)
        return partner == named if correction else named or "{old}" not in later.text
    if subject.name == "preference":
        return ("{drink" in later.text) == ("{drink}" in fact.text)
    if subject.name == "pet":
        return named or "{new}" not in later.text
    return True


class _Said:
    """The sessions of one user: statements among small talk."""

    def __init__(self, rng: random.Random, user: str, lang: Lang, fillers: int,
                 messages: list[Message], sessions: list[tuple[datetime, str, str, str]]) -> None:
        self.rng, self.user, self.lang, self.fillers = rng, user, lang, fillers
        self.messages, self.sessions = messages, sessions

    def _small_talk(self, lines: list[tuple[str, str, str | None]], n: int) -> None:
        for _ in range(n):
            lines.append(("user", self.rng.choice(FILLER_USER[self.lang]), None))
            lines.append(("assistant", self.rng.choice(FILLER_ASSISTANT[self.lang]), None))

    def session(self, n: int, statements: list[tuple[str, str]], start: datetime
                ) -> dict[tuple[str, str], str]:
        """Session ``n``; the event id of each statement by (subject, "fact" | "later")."""
        conv = f"{self.user}-s{n}"
        lines: list[tuple[str, str, str | None]] = []
        for key, text in statements:
            self._small_talk(lines, self.rng.randint(0, self.fillers))
            lines.append(("user", text, key))
            lines.append(("assistant", self.rng.choice(FILLER_ASSISTANT[self.lang]), None))
        if not statements:
            self._small_talk(lines, self.rng.randint(3, 6))
        events = {}
        for i, (role, text, key) in enumerate(lines):
            event_id = f"{conv}-{i}"
            if key is not None:
                events[(key, "fact" if n == 0 else "later")] = event_id
            self.messages.append(Message(event_id, self.user, conv, role, text,
                                         start + timedelta(minutes=i)))
        self.sessions.append((start, self.user, conv, f"{conv}-{len(lines) - 1}"))
        return events


def build(users: int = 400, *, seed: int = 16, zh_share: float = 0.34,
          fillers: int = 4, correction_share: float = 0.65) -> Workload:
    """``users`` users; each states a fact per subject, then follows each up."""
    rng = random.Random(seed)
    t0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    used: Counter[tuple[str, str, str]] = Counter()  # (subject, lang, template id) -> uses
    messages: list[Message] = []
    sessions: list[tuple[datetime, str, str, str]] = []
    cases: list[Case] = []
    for u in range(users):
        user = f"user-{u}"
        lang: Lang = "zh" if rng.random() < zh_share else "en"
        later_by_session: list[list[tuple[Subject, Template, Template, str, str]]] = [[], [], []]
        firsts: list[tuple[Subject, str, str]] = []
        for subject in SUBJECTS:
            fact = rng.choice(subject.facts[lang])
            kind: CaseKind = "correction" if rng.random() < correction_share else "other"
            pool = subject.corrections[lang] if kind == "correction" else subject.others[lang]
            fitting = [t for t in pool if _fits(subject, fact, t, kind == "correction")]
            least = min(used[(subject.name, lang, t.id)] for t in fitting)
            later = rng.choice([t for t in fitting if used[(subject.name, lang, t.id)] == least])
            used[(subject.name, lang, later.id)] += 1
            fact_text, later_text = _case_texts(rng, subject, lang, fact, later)
            firsts.append((subject, fact.id, fact_text))
            later_by_session[rng.randrange(3)].append((subject, fact, later, fact_text,
                                                       later_text))
        events: dict[tuple[str, str], str] = {}  # (subject, "fact" | "later") -> event id
        said = _Said(rng, user, lang, fillers, messages, sessions)
        events.update(said.session(0, [(s.name, text) for s, _, text in firsts],
                                   t0 + timedelta(minutes=u)))
        said.session(1, [], t0 + timedelta(days=3, minutes=u))  # small talk only
        for n, later in enumerate(later_by_session, start=2):
            if later:
                events.update(said.session(n, [(s.name, text) for s, _, _, _, text in later],
                                           t0 + timedelta(days=5 + 4 * n, minutes=u)))
        for group in later_by_session:
            for subject, _, later, fact_text, later_text in group:
                kind = "correction" if later in subject.corrections[lang] else "other"
                cases.append(Case(user, subject.name, lang, kind, f"{lang}/{later.id}",
                                  later.held_out, events[(subject.name, "fact")],
                                  events[(subject.name, "later")], fact_text, later_text))
    messages.sort(key=lambda m: (m.created_at, m.event_id))
    return Workload(messages, [s[1:] for s in sorted(sessions)], cases)
