"""Standing instructions: what a user told the assistant to do in every later answer.

"Always include version numbers when I ask about software dependencies." is not a
fact about the user, nor an event: it is a rule for the assistant's answers that
holds until the user takes it back, and it matters exactly when a later request
falls under it ("Which libraries does this project use?"). Such a request rarely
shares the instruction's words, and the instruction's one session rarely scores
like a session about the topic, so by plain relevance it ranks below the
project's own turns. :func:`standing_instruction` recognises one; the fusion
lifts a relevant one to the top of a reply (:mod:`.fusion`, step 8), and the
rule judge keeps it as a preference.

A standing instruction is a user's sentence that

* gives an order — a verb of answering or presenting (use, include, format,
  give, show, explain, answer …) after "always", "never", "don't" / "do not"
  or "make sure to" (each maybe after "Please", "From now on", "Going forward",
  "In future" …), or right after such a standing lead ("From now on, answer
  in Spanish");
* and says when it holds or that it is standing: "when(ever) I ask / mention /
  need / request …", "if I ask …", "in your answers / responses / code …", or
  it opened with "from now on", "going forward", "in future" (or "from here on").

In Chinese: 以后 / 今后 / 从现在起 / 从现在开始, or 每当我问 / 每次我问 / 当我问 …
(时|的时候), with 请 or a verb of answering (用, 使用, 给出, 提供, 包括, 列出, 回答 …).

Small talk that only looks like an order is not one: "Always be yourself!",
"Never give up on your dreams", "Don't worry about it", "Always happy to help"
(no verb of answering, or no condition and no standing lead).
"""

from __future__ import annotations

import re

_SPEAKER = re.compile(r"^\s*[^\W\d_][\w .'’-]{0,60}?\s*:\s+")
_LEAD = (r"(?:(?:from\s+now\s+on|from\s+here\s+on|going\s+forward|moving\s+forward"
         r"|in\s+(?:the\s+)?future)\s*,?\s*)")
_VERBS = (
    r"(?:use|include|format|give|provide|show|explain|answer|reply|respond|write|add|list"
    r"|mention|cite|keep|start|begin|end|confirm|maintain|present|put|state|express|round"
    r"|convert|label|highlight|structure|organi[sz]e|break|summari[sz]e|compare|recommend"
    r"|suggest|double-check|check|verify|ask|remind|avoid|call|refer|address|translate"
    r"|stick|follow|apply|note|point|show|walk|offer|attach|insert|quote|spell|number"
    r"|bold|split|limit|assume|prefer|focus|default|write|respond|return|output|display)")
_ORDER = re.compile(
    rf"^(?:please\s*,?\s*)?(?:{_LEAD}(?:please\s+)?(?:always\s+)?"
    rf"|{_LEAD}?(?:please\s+)?(?:(?:always|never|don'?t|do\s+not)\s+(?:ever\s+)?"
    rf"(?:(?:also|just|first)\s+)?|make\s+sure\s+(?:to|you)\s+(?:always\s+)?)){_VERBS}\b",
    re.I)
_STANDING_LEAD = re.compile(rf"^(?:please\s*,?\s*)?{_LEAD}", re.I)
_CONDITION = re.compile(
    r"\b(?:when(?:ever)?|if|each\s+time|every\s+time|any\s*time)\s+i\s+(?:\w+\s+)?"
    r"(?:ask|mention|need|request|want|bring\s+up|talk|inquire|enquire|query|look|am\s+asking"
    r"|work|share|send|paste|discuss|raise)"
    r"|\bin\s+(?:your|all|every|any|the)\s+(?:\w+\s+)?(?:answers?|responses?|replies|explanations?"
    r"|code|examples?|suggestions?|snippets?|solutions?|summaries|outputs?)\b",
    re.I)
_ZH_STANDING = re.compile(
    r"^(?:请)?(?:以后|今后|从现在起|从现在开始|往后)|(?:每当|每次|当)我(?:问|提到|询问|需要)")
_ZH_ORDER = re.compile(
    r"请|(?:都|总是|始终|一律|务必)(?:要)?(?:用|使用|给出|提供|包括|包含|列出|回答|附上|说明|标注)")


def standing_instruction(text: str) -> bool:
    """Whether ``text`` (one sentence or a short message, maybe ``"Name: …"``) is a
    user's standing instruction for the assistant's answers (see the module)."""
    body = _SPEAKER.sub("", text[:480], count=1).strip().replace("’", "'")[:400]
    if not body:
        return False
    if _ORDER.match(body):
        return bool(_STANDING_LEAD.match(body) or _CONDITION.search(body))
    return bool(_ZH_STANDING.search(body[:60]) and _ZH_ORDER.search(body))
