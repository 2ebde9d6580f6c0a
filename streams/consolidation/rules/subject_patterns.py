"""The statement patterns :mod:`.subjects` reads, in English and Chinese.

Each :class:`Pattern` matches one clause, already cleaned (fillers such as
"actually", "now", 其实, 现在 removed; a clause without a subject given the
"I" of the clause before it). Its named groups say what the clause claims:

``v``     the value of the pattern's subject (``key``), unless ``value`` is fixed;
``neg``   present: the clause says the value no longer holds;
``old``   a value the clause says was left ("from X to Y", 从X搬到Y);
``k``     a part of the key ("favourite ``colour``", "my ``sister``");
``s``     a pet species (its own subject: a user may have a dog *and* a cat);
``n``     the pet's name; ``p`` a partner's name, ``gone`` a partner left.

A ``key`` of ``""`` claims no subject: only its value is said to be left
("I left Siemens", "I switched from tea to coffee"), whichever subject held it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Pattern:
    regex: re.Pattern[str]
    key: str
    value: str | None = None  # a fixed value ("I eat meat again": omnivore)
    loose: bool = False  # the value must look like a job title ("I'm a nurse", not "a fan")


def _en(key: str, *parts: str, value: str | None = None, loose: bool = False) -> Pattern:
    return Pattern(re.compile("^" + "".join(parts) + "$", re.I), key, value, loose)


def _zh(key: str, *parts: str, value: str | None = None, loose: bool = False) -> Pattern:
    return Pattern(re.compile("^" + "".join(parts) + "$"), key, value, loose)


_I = r"(?:i|we)"  # "we moved", "we got married": the user's household
_BE = r"(?:i|we)(?:'m| am|'re| are|'ve been| have been)"
_HAVE = r"i(?:'ve| have)?"
_NEG = r"(?:(?P<neg>no longer|not|don't|do not|never) )?"
_A = r"(?:an? |the )?"
DIETS = r"vegetarian|vegan|pescatarian|pescetarian|flexitarian|omnivore|carnivore|keto"
STATUSES = r"single|married|engaged|divorced|widowed|separated|in a relationship|taken"
SPECIES = (r"dogs?|cats?|pupp(?:y|ies)|kittens?|rabbits?|hamsters?|parrots?|birds?|fish"
           r"|turtles?|tortoises?|horses?|guinea pigs?|snakes?|ferrets?")
PARTNERS = r"girlfriend|boyfriend|partner|wife|husband|fianc[ée]e?|spouse"
_PROPER = r"(?P<v>(?-i:[A-Z0-9])[\w&.'-]*(?: (?-i:[A-Z0-9])[\w&.'-]*){0,3})"

EN: list[Pattern] = [
    # home
    _en("residence", _HAVE, r"(?: moved| relocated) from (?P<old>.+?) to (?P<v>.+)"),
    _en("residence", _I, r"(?:'m| am|'re| are|'ve| have)? ", _NEG,
        r"(?:live|living|reside|residing|based|moved|relocated)(?: back)? (?:in|to|at) (?P<v>.+)"),
    _en("residence", r"my (?:home|address) is (?:in |at )?(?P<v>.+)"),
    # employer
    _en("employer", r"i(?:'ve| have)? (?:switched|changed|moved) (?:jobs|companies|employers) "
        r"from (?P<old>.+?) to (?P<v>.+)"),
    _en("employer", r"i(?:'m| am|'ve been| have been)? ", _NEG,
        r"(?:work|working|employed) (?:at|for|by) (?P<v>.+)"),
    _en("employer", r"i(?: just)? (?:joined|started at) ", _PROPER, r"(?: .*)?"),
    _en("", r"i(?:'ve| have)? (?:left|quit) ", _PROPER, r"(?: .*)?"),
    _en("", r"i(?:'ve| have)? (?:switched|changed|moved|went) from (?P<v>.+?) to .+"),
    # diet (before jobs: "I'm a vegetarian" is no job)
    _en("diet", _BE, " ", _NEG, _A, r"(?P<v>", DIETS, r")(?: diet)?"),
    _en("diet", r"i(?: have)? (?:switched|changed|went|turned|became|become) (?:to )?",
        _A, r"(?P<v>", DIETS, r")(?: diet)?"),
    _en("diet", r"i (?P<neg>stopped|quit) being ", _A, r"(?P<v>", DIETS, r")"),
    _en("diet", r"i (?:eat|started eating|eat) meat(?: again)?", value="omnivore"),
    _en("diet", r"i (?:don't|do not|no longer|stopped eating|gave up) (?:eat )?meat",
        value="vegetarian"),
    # relationship
    _en("status", _BE, " ", _NEG, r"(?:happily )?(?P<v>", STATUSES, r")(?: to (?P<p>.+))?"),
    _en("status", _I, r" got (?P<v>married|engaged|divorced)(?: to (?P<p>.+))?"),
    _en("status", r"(?:(?P<gone>\w+) and i|we) broke up", value="single"),
    _en("status", r"i broke up with (?P<gone>.+)", value="single"),
    _en("partner", r"my (?:", PARTNERS, r")(?:'s name is| is called| is named) (?P<v>.+)"),
    _en("partner", r"my (?:", PARTNERS, r") is ", _PROPER),
    _en("partner", r"i(?:'m| am) (?:dating|seeing|with) (?P<v>(?-i:[A-Z])\w+)"),
    _en("partner", r"i(?:'m| am) (?P<neg>no longer|not) with (?P<v>.+)"),
    # pets
    _en("pet:{s}", _HAVE, r"(?: got| own| adopted|'ve got| have got)? ", _A,
        r"(?:one |two |three |\d+ )?(?P<s>", SPECIES, r")(?: (?:named|called) (?P<n>.+))?"),
    _en("pet:{s}", r"i(?: do not| don't| no longer)(?: have| own) (?:an? |any )?(?P<s>",
        SPECIES, r")", value="-"),
    _en("pet:{s}", r"(?:my|our) (?P<s>", SPECIES, r")(?: \w+)? (?:passed away|died|is gone"
        r"|ran away|was put down)", value="-"),
    _en("pet:{s}", _I, r" (?:gave|gave away|rehomed|lost) (?:my|our) (?P<s>", SPECIES,
        r")(?: away)?", value="-"),
    _en("pet name:{s}", r"my (?P<s>", SPECIES, r")(?:'s name)? is (?:called |named )?(?P<v>.+)"),
    # job
    _en("occupation", r"i(?:'m| am)? ", _NEG, r"(?:work|working) as (?:an? )?(?P<v>.+)"),
    _en("occupation", r"my (?:job|occupation|profession|career) is (?:an? )?(?P<v>.+)"),
    _en("occupation", r"i(?:'m| am) ", _NEG, r"(?:an? )(?P<v>[\w-]+(?: [\w-]+)?)"
        r"(?: by (?:profession|trade))?", loose=True),
    _en("occupation", r"i(?:'ve| have)? (?:became|become) (?:an? )(?P<v>[\w-]+(?: [\w-]+)?)",
        loose=True),
    _en("occupation", r"i (?P<neg>quit|stopped) being (?:an? )(?P<v>[\w-]+(?: [\w-]+)?)",
        loose=True),
    # identity
    _en("name", r"(?:my name is|i am called|i'm called|people call me|call me) (?P<v>.+)"),
    _en("age", r"i(?: am|'m) (?P<v>\d+)(?: years old)?"),
    # preferences
    _en("favourite:{k}", r"my (?:all-time )?(?:favou?rite|fave) (?P<k>[\w ]+?) (?:is|are) "
        r"(?P<v>.+)"),
    _en("likes:{v}", r"i (?:(?P<neg>don't|do not|no longer|never) )?(?:like|love|enjoy|adore"
        r"|prefer) (?P<v>.+)"),
    _en("likes:{v}", r"i (?:hate|dislike|detest|can't stand|cannot stand) (?P<v>.+)", value="-"),
    _en("likes:{v}", r"i(?: am|'m) ", _NEG, r"(?:a )?(?:big |huge )?(?:fan of|into) (?P<v>.+)"),
    # anything else said of "my X"
    _en("my:{k}", r"my (?P<k>[\w' -]{1,40}?) is (?P<v>.+)"),
]

_ZNEG = r"(?P<neg>不再|不|没有|没)?"
ZH: list[Pattern] = [
    _zh("residence", r"我(?:们)?从(?P<old>.+?)搬(?:到|去|回)了?(?P<v>.+?)了?"),
    _zh("residence", r"我(?:们)?", _ZNEG, r"(?:住在|住|定居在|定居于|搬到了|搬到|搬去了|搬去"
        r"|搬回了|搬回|搬家到了|搬家到)(?P<v>.+?)了?"),
    _zh("employer", r"我从(?P<old>.+?)跳槽(?:到|去)了?(?P<v>.+?)了?"),
    _zh("employer", r"我跳槽(?:到|去)了?(?P<v>.+?)了?"),
    _zh("employer", r"我(?:加入|入职)了?(?P<v>.+?)了?"),
    _zh("", r"我(?:离开|辞职离开)了(?P<v>.+?)了?"),
    _zh("employer", r"我", _ZNEG, r"在(?P<v>(?!家).+?)(?:工作|上班)了?"),
    _zh("diet", r"我", _ZNEG, r"(?:改|开始)?(?P<v>吃素|吃纯素|吃全素|吃荤|吃肉|是素食者"
        r"|是素食主义者|是纯素食者)了?"),
    _zh("status", r"我", _ZNEG, r"(?P<v>单身|已婚|结婚了|订婚了|离婚了|恋爱了|谈恋爱了|有女朋友了"
        r"|有男朋友了|有对象了)了?"),
    _zh("status", r"我(?:和(?P<gone>.+?)|们)分手了", value="single"),
    _zh("partner", r"我(?:的)?(?:现在的)?(?:女朋友|男朋友|老婆|老公|妻子|丈夫|太太|先生|对象|未婚妻"
        r"|未婚夫)(?:叫|的名字是)(?P<v>.+)"),
    _zh("pet:{s}", r"我", _ZNEG, r"(?:养了|养|有)(?:一只|一条|两只|只|条)?(?P<s>狗|猫|兔子|仓鼠"
        r"|鹦鹉|鸟|鱼|乌龟)了?(?:，?叫(?P<n>.+))?"),
    _zh("pet:{s}", r"我的(?P<s>狗|猫|兔子|仓鼠|鹦鹉|鸟|鱼|乌龟)(?:去世|死|走丢|丢)了", value="-"),
    _zh("pet name:{s}", r"我的(?P<s>狗|猫|兔子|仓鼠|鹦鹉|鸟|鱼|乌龟)(?:叫|的名字是)(?P<v>.+)"),
    _zh("name", r"(?:我叫|我的名字是|我的名字叫)(?P<v>.+)"),
    _zh("occupation", r"我的(?:工作|职业)是(?P<v>.+?)了?"),
    _zh("occupation", r"我", _ZNEG, r"(?:改行|转行)?(?:当|做|是)了?(?:一名|一位|一个|名)?"
        r"(?P<v>.+?)了?", loose=True),
    _zh("age", r"我(?:今年)?(?P<v>\d+|[一二三四五六七八九十]+)岁"),
    _zh("favourite:{k}", r"我最喜欢的(?P<k>.+?)是(?P<v>.+)"),
    _zh("likes:{v}", r"我(?P<neg>不太|不是很|不再|不)?(?:喜欢|爱吃|爱喝|爱)(?P<v>.+?)了?"),
    _zh("likes:{v}", r"我(?:讨厌|受不了)(?P<v>.+)", value="-"),
    _zh("my:{k}", r"我的(?P<k>.{1,10}?)(?:是|叫)(?P<v>.+)"),
]

# the words a job title ends in, and titles that do not
_JOB_ENDINGS = ("er", "or", "ist", "ian", "ant", "ent", "eer", "man", "woman", "smith")
def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


JOBS = _words(
    "nurse chef pilot architect cook clerk judge coach tutor vet surgeon barista student "
    "intern nanny midwife attorney analyst scientist economist diplomat bartender")
NOT_JOBS = _words(
    "fan person mother father parent dad mom mum wife husband son daughter brother sister "
    "friend member owner lover beginner believer introvert extrovert runner swimmer gamer "
    "reader dreamer hiker climber skier surfer cyclist golfer smoker drinker sleeper learner "
    "speaker user customer follower supporter listener watcher newcomer foreigner stranger "
    "vegetarian vegan pescatarian pescetarian flexitarian omnivore carnivore "
    "grandmother grandfather grandparent twin partner fiance fiancee bit lot")
_ZH_JOB_ENDINGS = ("师", "员", "生", "家", "士", "工", "手", "官", "记者", "会计", "司机", "老板",
                   "警察", "作家", "画家")
DIET_VALUES = {"吃素": "vegetarian", "是素食者": "vegetarian", "是素食主义者": "vegetarian",
               "吃纯素": "vegan", "吃全素": "vegan", "是纯素食者": "vegan", "吃荤": "omnivore",
               "吃肉": "omnivore", "pescetarian": "pescatarian", "carnivore": "omnivore"}
STATUS_VALUES = {"已婚": "married", "结婚": "married", "订婚": "engaged", "离婚": "divorced",
                 "单身": "single", "恋爱": "in a relationship", "谈恋爱": "in a relationship",
                 "有女朋友": "in a relationship", "有男朋友": "in a relationship",
                 "有对象": "in a relationship", "taken": "in a relationship"}
SPECIES_VALUES = {"狗": "dog", "猫": "cat", "兔子": "rabbit", "仓鼠": "hamster", "鹦鹉": "parrot",
                  "鸟": "bird", "鱼": "fish", "乌龟": "turtle", "puppy": "dog", "puppies": "dog",
                  "kitten": "cat", "tortoise": "turtle"}


def job_like(title: str) -> bool:
    """Whether ``title`` (normalised) names a job: "nurse", "teacher", 护士, 程序员."""
    if any("\u4e00" <= ch <= "\u9fff" for ch in title):
        return title.endswith(_ZH_JOB_ENDINGS) and not title.endswith("素食者")
    head = title.split()[-1] if title.split() else ""
    if head in NOT_JOBS or not head.isalpha():
        return False
    return head in JOBS or head.endswith(_JOB_ENDINGS)
