"""What the chaos workload's people say: sentences the rule judge turns into
memories, and small talk it ignores.

The words are chosen so that the outcome of consolidation does not depend on
which of two concurrent sessions is consolidated first. A conflict search only
meets memories that share a word with the candidate, so:

* each user states each kind of fact (:data:`SLOTS`) in one conversation only,
  with values of their own; the only facts a user states in several
  conversations are the same sentence word for word (their name, and the
  employer of a linked pair), which end as one memory whichever comes first;
* corrections follow their fact in a later session of the same conversation,
  whose sessions are consolidated in order (and a correction consolidated
  before its fact still wins: the older fact is not newer than it);
* lessons (agent memories, shared by all users of an agent) have words of
  their own, and the same lesson is always the same sentence;
* small talk and the assistant's replies share no word with any of them.

``tests/unit/test_chaos_workload.py`` checks these properties on the
generated workload with the project's own tokenizer and rule judge.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Slot:
    """One kind of fact: its sentence, and the correction of a later session."""

    name: str
    statement: str  # with {v}
    correction: str | None  # with {v}; None: never corrected
    values: tuple[str, ...]
    same_value_corrected: bool = False  # the correction keeps the value (a polarity flip)

    def say(self, value: str) -> str:
        return self.statement.format(v=value)

    def correct(self, value: str) -> str:
        assert self.correction is not None
        return self.correction.format(v=value)


_CITIES = ("Lisbon", "Porto", "Oslo", "Bergen", "Krakow", "Gdansk", "Seville", "Valencia",
           "Turin", "Genoa", "Ghent", "Bruges", "Tartu", "Riga", "Kaunas", "Zadar", "Cork",
           "Galway", "Aarhus", "Malmo", "Tampere", "Graz", "Linz", "Brno")
_JOBS = ("nursing", "teaching", "plumbing", "farming", "accounting", "baking", "welding",
         "tailoring", "gardening", "surveying", "brewing", "carpentry")
_DOGS = ("Rex", "Bruno", "Fido", "Bolt", "Duke", "Ziggy", "Mango", "Pepper", "Biscuit",
         "Oscar", "Tucker", "Milo")
_COLOURS = ("teal", "amber", "crimson", "olive", "indigo", "ivory", "maroon", "ochre",
            "cobalt", "lilac")
_HOBBIES = ("hiking", "chess", "karaoke", "sailing", "pottery", "climbing", "knitting",
            "surfing", "archery", "rowing", "juggling", "fencing")

SLOTS: tuple[Slot, ...] = (
    Slot("residence", "I live in {v}.", "Actually, I live in {v} now.", _CITIES),
    Slot("job", "My job is {v}.", "Actually, my job is {v} now.", _JOBS),
    Slot("dog", "My dog is {v}.", "Actually, my dog is {v} now.", _DOGS),
    Slot("colour", "My favourite colour is {v}.", "Actually, my favourite colour is {v} now.",
         _COLOURS),
    Slot("hobby", "I love {v}.", "Actually, I don't like {v} anymore.", _HOBBIES,
         same_value_corrected=True),
    Slot("age", "I'm {v} years old.", "Actually, I'm {v} years old now.",
         tuple(str(n) for n in range(20, 70))),
    Slot("flat", "Please remember that my flat is number {v}.",
         "Actually, my flat is number {v} now.", tuple(str(n) for n in range(100, 1000))),
)

NAME = Slot("name", "My name is {v}.", None,
            ("Ana", "Boris", "Chiara", "Dmitri", "Elif", "Farid", "Greta", "Hugo", "Ines",
             "Jonas", "Katja", "Luca", "Mira", "Nils", "Olga", "Pavel", "Rosa", "Sven", "Tariq",
             "Uma", "Vera", "Wim", "Xenia", "Yusuf", "Zora"))
EMPLOYER = Slot("employer", "I work at {v}.", None,
                ("Philips", "Siemens", "Bosch", "Nokia", "Ericsson", "Heineken", "Lego",
                 "Ikea", "Volvo", "Fiat", "Airbus", "Unilever"))

# assistant sentences the rule judge keeps as agent memories (one type "tool")
LESSONS = (
    "Lesson learned: confirm baggage allowance early.",
    "Lesson learned: quote prices including taxes.",
    "Lesson learned: offer vegetarian menus first.",
    "Lesson learned: double-check timezone conversions.",
    "Lesson learned: mention passport validity rules.",
    "Lesson learned: retry the booking api after a timeout.",
    "Lesson learned: summarise long itineraries briefly.",
    "Lesson learned: ask about mobility needs upfront.",
)

SMALL_TALK = ("Thanks, that helps.", "Sounds good.", "Hmm, let me think about it.",
              "Can you suggest something for the weekend?", "Okay.", "That makes sense.",
              "Good morning!", "See you later.")
REPLIES = ("Got it.", "Happy to help with that.", "Here is what I found.",
           "Noted, thanks for sharing.", "Sure, go ahead.", "Let me check.")
SYSTEM_PROMPT = "You are a helpful assistant."
TOOL_NAME = "lookup_calendar"
TOOL_RESULT = '{"ok": true}'
QUESTIONS = ("What do you remember about me?", "Where do I live?", "What is my job?",
             "Which lessons did you learn?", "What did we talk about?")
