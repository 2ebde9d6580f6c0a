"""Sensitive-content detection: per-kind precision and recall on the labelled
corpus, false positives and cost on the LoCoMo dev conversations.

    make bench-sensitive                # or: .venv/bin/python bench/sensitive.py [--show]

The corpus is tests/data/sensitive_corpus.jsonl (bench/sensitive_corpus.py
writes it; streams/devtools/sensitive_eval.py says how it is scored). The
LoCoMo turns are ../shared/bench/locomo-dev.json: a turn counts as a false
positive when the scanner reports any structured kind in it (the
conversations hold no card, account, id, credential or address; ``--show``
prints what was found, to check that claim). Names are measured with NER on,
places too; the default policy keeps both and does not load the model.
Adversarial texts (100 and 400 KB of one unit repeated: IPv4 addresses,
digits with separators, ``a@b``, base64-ish characters, Chinese digits) show
that the work per text is bounded (``rules/sensitive/budget.py``): their
cost must grow with the text's length and no faster. No services are needed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import machine_ticks, steal_pct
from streams.consolidation.ports import SensitiveDetector
from streams.consolidation.rules.sensitive.kinds import STRUCTURED, Finding, Kind
from streams.devtools.sensitive_eval import CORPUS, Sentence, load, score

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "bench" / "locomo-dev.json"


def rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096 / 1e6


def locomo_turns(path: Path) -> list[str]:
    turns = []
    for sample in json.loads(path.read_text()):
        conversation = sample["conversation"]
        for key, value in conversation.items():
            if key.startswith("session_") and isinstance(value, list):
                turns += [turn["text"] for turn in value]
    return turns


def corpus_table(sentences: list[Sentence], scanner: SensitiveDetector) -> dict[str, object]:
    print(f"\ncorpus: {len(sentences)} sentences "
          f"({sum(not s.expected for s in sentences)} with nothing to find)")
    print(f"{'kind':<12} {'lang':<4} {'spans':>5} {'recall':>7} {'precision':>9} {'exact':>6}")
    for lang in ("all", "en", "zh"):
        chosen = [s for s in sentences if lang in ("all", s.lang)]
        result = score(chosen, scanner.detect, frozenset(Kind))
        for kind in Kind:
            t = result.kinds.get(kind)
            if t is None:
                continue
            exact = f"{t.exact}/{t.found}" if t.found else "-"
            print(f"{kind:<12} {lang:<4} {t.expected:>5} {t.recall:>7.3f} {t.precision:>9.3f} "
                  f"{exact:>6}")
    whole = score(sentences, scanner.detect, frozenset(Kind))
    print("\nwhat went wrong:")
    for what, text in whole.misses:
        print(f"  {what:<40} | {text[:90]!r}")
    return {str(k): {"recall": round(t.recall, 3), "precision": round(t.precision, 3),
                     "spans": t.expected} for k, t in whole.kinds.items()}


def adversarial_texts(size: int) -> dict[str, str]:
    """One unit repeated to ``size`` characters, per shape a hostile tenant may send."""
    rng = random.Random(1)
    base64ish = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                   "0123456789+/_-") for _ in range(4096))
    units = {"1.2.3.4 repeated": "1.2.3.4 ", "digits, separators": "4111-1111 1111.1111/ 0917 ",
             "a@b repeated": "a@b ", "a@b.com repeated": "a@b.com ", "base64-ish": base64ish,
             "Chinese digits": "我的号码是138１２３４５６７８，一二三四五六七八九〇"}
    return {label: (unit * (size // len(unit) + 1))[:size] for label, unit in units.items()}


def adversarial(scanner: SensitiveDetector) -> dict[str, list[float]]:
    print("\nadversarial texts (one detect call each):")
    costs: dict[str, list[float]] = {}
    for size in (100_000, 400_000):
        for label, text in adversarial_texts(size).items():
            t0 = time.perf_counter()
            found = scanner.detect(text)
            ms = (time.perf_counter() - t0) * 1000
            costs.setdefault(label, []).append(round(ms))
            print(f"  {label:<20} {size // 1000:>4} KB {ms:8.0f} ms  {len(found)} findings")
    return costs


def timed(detect: SensitiveDetector, turns: list[str]
          ) -> tuple[list[float], Counter[str], int]:
    costs, kinds, flagged = [], Counter[str](), 0
    for turn in turns:
        t0 = time.perf_counter()
        found = detect.detect(turn)
        costs.append((time.perf_counter() - t0) * 1000)
        structured = {f.kind for f in found if f.kind in STRUCTURED}
        flagged += bool(structured)
        kinds.update(str(k) for k in structured)
    return costs, kinds, flagged


def locomo(turns: list[str], scanner: SensitiveDetector, label: str,
           show: bool) -> dict[str, float]:
    costs, kinds, flagged = timed(scanner, turns)
    q = statistics.quantiles(costs, n=100)
    print(f"{label:<22} {len(turns)} turns: structured findings in {flagged} "
          f"({100 * flagged / len(turns):.2f} %) {dict(kinds)}; "
          f"per turn mean {statistics.fmean(costs):.2f} ms, p50 {q[49]:.2f}, p99 {q[98]:.2f}")
    if show:
        for turn in turns:
            found: list[Finding] = [f for f in scanner.detect(turn) if f.kind in STRUCTURED]
            for f in found:
                print(f"    {f.kind}: {turn[f.start:f.end]!r} in {turn[:80]!r}")
    return {"fp_turns_pct": round(100 * flagged / len(turns), 2),
            "ms_mean": round(statistics.fmean(costs), 2), "ms_p99": round(q[98], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--show", action="store_true", help="print LoCoMo's findings")
    parser.add_argument("--data", type=Path, default=LOCOMO, help="the LoCoMo dev JSON")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="the labelled corpus")
    args = parser.parse_args()
    ticks = machine_ticks()
    before, t0 = rss_mb(), time.perf_counter()
    scanner_module = importlib.import_module("streams.adapters.sensitive.scanner")
    print(f"import (Presidio, detect-secrets): {time.perf_counter() - t0:.2f} s, "
          f"+{rss_mb() - before:.0f} MB")
    before, t0 = rss_mb(), time.perf_counter()
    structured = scanner_module.SensitiveScanner()
    print(f"structured scanner: built in {time.perf_counter() - t0:.2f} s, "
          f"+{rss_mb() - before:.0f} MB")
    before, t0 = rss_mb(), time.perf_counter()
    with_names = scanner_module.SensitiveScanner(names=True)
    print(f"scanner with NER:   built in {time.perf_counter() - t0:.2f} s, "
          f"+{rss_mb() - before:.0f} MB more")
    kinds = corpus_table(load(args.corpus), with_names)
    turns = locomo_turns(args.data)
    print("\nLoCoMo dev:")
    default = locomo(turns, structured, "structured (default)", args.show)
    ner = locomo(turns, with_names, "with NER", False)
    hostile = adversarial(structured)
    steal = steal_pct(ticks, machine_ticks())
    print(f"\nsteal: {steal} % of the machine's CPU")
    print(json.dumps({"corpus": kinds, "locomo_default": default, "locomo_ner": ner,
                      "adversarial_ms_100k_400k": hostile, "steal_pct": steal}))


if __name__ == "__main__":
    main()
