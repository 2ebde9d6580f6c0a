"""The detector consolidation is given: every recognizer, one call per text.

Why these libraries (measured on the benchmark machine, 2 cores, the 2,760
turns of the LoCoMo dev conversations; docs/benchmarks.md):

* **Presidio** (presidio-analyzer) for the structured kinds: the recognizers
  the field uses, with their validations (Luhn, IBAN checksum, the
  ``phonenumbers`` matcher, SSN group checks). Importing it with
  detect-secrets costs 0.8-1.5 s and about 66 MB once per process (it
  imports spaCy, though no model is loaded); a chat turn is scanned in
  0.2 ms on average (p99 0.4-0.7 ms), every recognizer included. Built
  offline (``structured``): its default engine downloads a model, its e-mail
  check fetches the public-suffix list.
* **detect-secrets** for the token formats it knows (``secrets``).
* **memstream's own rules** where neither has one: Chinese resident ids
  (MOD 11-2 check digit) and SSNs stated as such (``national_ids``), e-mail
  addresses written with ``(at)`` or ``at … dot`` (``emails``), the key
  formats above the scanners' patterns, URLs' passwords and passwords stated
  as such in English and Chinese (``patterns``); and what names nobody though
  shaped like a kind (``nobody``).
* **spaCy NER** (``names``) only when asked (``names=True``): it is the
  costly part (50 MB, 6.5-9 ms a turn) and the default policy keeps names.

Chinese text: cards, IBANs, e-mail, phones (mainland numbers through the CN
region), IPs and ids are found inside Chinese sentences too, because the
pattern recognizers read :func:`cjk_blanked`'s view of the text (a CJK
character is a space there, offsets unchanged); Chinese names and places are
not found.

Every recognizer reads the text without its invisible format characters
(zero-width spaces and joiners, soft hyphens: ``visible``), and each finding
is mapped back to the text as written. The work per text is bounded: each
recognizer validates at most a budget of candidates, and takes the ones past
it as found (``budget``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from streams.adapters.sensitive.ibans import LowerCaseIbans
from streams.adapters.sensitive.names import NameRecognizer
from streams.adapters.sensitive.secrets import credential_findings
from streams.adapters.sensitive.structured import StructuredRecognizers, deliverable
from streams.consolidation.rules.sensitive.emails import obfuscated_emails
from streams.consolidation.rules.sensitive.kinds import Finding, resolved
from streams.consolidation.rules.sensitive.national_ids import resident_ids, stated_ssns
from streams.consolidation.rules.sensitive.patterns import blanked, cjk_blanked, credentials
from streams.consolidation.rules.sensitive.visible import visible

CHUNK, CHUNK_CHARS = 32, 16_384  # handed to the scanner's thread at once: about 5-25 ms


def chunks(texts: Sequence[str]) -> list[list[str]]:
    """``texts`` in order, cut into chunks of at most ``CHUNK`` texts that hold at most
    ``CHUNK_CHARS`` characters (``len``) together; a longer text is a chunk of its own
    (the work on one text is bounded by the recognizers' budgets)."""
    out: list[list[str]] = []
    chunk: list[str] = []
    chars = 0
    for t in texts:
        if chunk and (len(chunk) == CHUNK or chars + len(t) > CHUNK_CHARS):
            out.append(chunk)
            chunk, chars = [], 0
        chunk.append(t)
        chars += len(t)
    return [*out, chunk] if chunk else out


class ScannerClosed(RuntimeError):
    """The scanner was closed before a batch was screened."""


class SensitiveScanner:
    """Implements ``streams.consolidation.ports.SensitiveDetector``.

    Build one per process (the engines load here, not per call); ``detect``
    keeps no state between calls and is CPU-bound, so a caller on an event
    loop calls :meth:`detect_all`, which runs it on the scanner's own single
    worker thread (spaCy does not promise that one pipeline may run in several
    threads at once).
    """

    def __init__(self, *, names: bool = False) -> None:
        self._structured = StructuredRecognizers()
        self._ibans = LowerCaseIbans()
        self._names = NameRecognizer() if names else None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sensitive")
        self._closed = False

    async def detect_all(self, texts: Sequence[str]) -> list[list[Finding]]:
        """:meth:`detect` of each text on the scanner's one worker thread, off the
        event loop. Every caller of the process shares that thread, so the texts go to
        it a chunk at a time (:func:`chunks`), the next once the last is done: the
        callers take turns, a chunk each, and one with a few texts waits for a chunk of
        each other caller (another tenant's long session), not for all of theirs."""
        loop = asyncio.get_running_loop()
        found: list[list[Finding]] = []
        for chunk in chunks(texts):
            if self._closed:
                raise ScannerClosed("the sensitive-content scanner was closed (the worker "
                                    "is stopping): the batch was not screened")
            found += await loop.run_in_executor(self._thread, self._detect_each, chunk)
        return found

    def _detect_each(self, texts: list[str]) -> list[list[Finding]]:
        return [self.detect(t) for t in texts]

    def close(self) -> None:
        """Let the worker thread go once the chunks handed to it are done; a batch with
        more to screen, or a call after this, raises :class:`ScannerClosed`."""
        self._closed = True
        self._thread.shutdown(wait=False)

    @property
    def finds_names(self) -> bool:
        """Whether names and places are looked for."""
        return self._names is not None

    def detect(self, text: str) -> list[Finding]:
        """Every finding in ``text``, in text order, overlaps settled
        (``resolved``: the longer span stays)."""
        seen = visible(text)
        read = seen.text
        ids = resident_ids(read)
        # a valid resident id is read by no other recognizer (its check letter X would
        # start a phone number's extension: "…309X，手机139…")
        view = blanked(cjk_blanked(read), ids)
        found = self._structured.findings(view) + self._ibans.findings(view)
        found += credential_findings(view) + credentials(read) + ids + stated_ssns(read)
        found += obfuscated_emails(view, deliverable)
        if self._names is not None:
            found += self._names.findings(read)
        return [seen.original(f) for f in resolved(found)]
