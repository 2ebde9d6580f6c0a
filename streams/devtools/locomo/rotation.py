"""Leave-one-conversation-out rotation: tune on the other conversations, measure on one.

Every retrieval parameter is chosen by this rotation, never by the score on
the data it is measured on. With ``n`` conversations there are ``n`` folds;
fold ``i`` holds conversation ``i`` out, chooses the configuration that scores
best on the questions of the others (the *objective*, the mean of the
per-question figure it names), and measures the chosen configuration on the
held-out questions only. Each question is measured exactly once, in the fold
that held its conversation out; pooling those measurements gives the
held-out-by-rotation figure, the honest estimate for conversations that were
never tuned on.

The harness gives two callables, both asked with question indices only, so it
may compute or cache as it likes and :func:`rotate` alone decides what each
is asked: ``score(config, questions) -> float``, the objective the choice
maximises (:func:`mean_score` makes it the mean of one figure of the rows),
and ``evaluate(config, questions) -> rows``, one row of figures per question
in the order asked, for the measurement. Configurations are tried in the
order given and a later one replaces the best only by scoring strictly
higher, so on ties the first wins (put the shipped defaults first).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

C = TypeVar("C", bound=Hashable)
Row = Mapping[str, float]
Evaluate = Callable[[C, Sequence[int]], Sequence[Row]]
Score = Callable[[C, Sequence[int]], float]


@dataclass(frozen=True)
class Fold:
    """One fold: the conversation held out, and the question indices of each side."""

    held_out: str
    train: tuple[int, ...]
    test: tuple[int, ...]


@dataclass(frozen=True)
class FoldResult(Generic[C]):
    fold: Fold
    chosen: C
    train_objective: float
    rows: tuple[Row, ...]  # the held-out questions' rows, in ``fold.test`` order


@dataclass(frozen=True)
class Rotation(Generic[C]):
    folds: tuple[FoldResult[C], ...]

    def held_out_rows(self) -> list[tuple[int, Row]]:
        """Every question's held-out row, as (question index, row), by question index."""
        out = [(q, r) for f in self.folds for q, r in zip(f.fold.test, f.rows, strict=True)]
        return sorted(out, key=lambda qr: qr[0])

    def chosen_counts(self) -> Counter[C]:
        return Counter(f.chosen for f in self.folds)


def folds(groups: Sequence[str]) -> list[Fold]:
    """One fold per distinct group (conversation), in order of first appearance.

    ``groups[i]`` is the conversation of question ``i``.
    """
    names = list(dict.fromkeys(groups))
    if len(names) < 2:
        raise ValueError("a rotation needs at least two conversations")
    return [
        Fold(name,
             tuple(i for i, g in enumerate(groups) if g != name),
             tuple(i for i, g in enumerate(groups) if g == name))
        for name in names
    ]


def mean_of(rows: Sequence[Row], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows) if rows else 0.0


def mean_score(evaluate: Evaluate[C], key: str) -> Score[C]:
    """The objective "mean of ``key`` over the questions", from the rows of ``evaluate``."""
    return lambda config, questions: mean_of(evaluate(config, questions), key)


def choose(configs: Sequence[C], questions: Sequence[int], score: Score[C]) -> tuple[C, float]:
    """The configuration scoring best over ``questions`` (the first on ties)."""
    if not configs:
        raise ValueError("no configuration to choose from")
    best, best_score = configs[0], float("-inf")
    for c in configs:
        s = score(c, questions)
        if s > best_score:
            best, best_score = c, s
    return best, best_score


def rotate(configs: Sequence[C], groups: Sequence[str], score: Score[C],
           evaluate: Evaluate[C]) -> Rotation[C]:
    """Each fold chooses on its training questions and is measured on its held-out ones."""
    out: list[FoldResult[C]] = []
    for fold in folds(groups):
        chosen, best = choose(configs, fold.train, score)
        out.append(FoldResult(fold, chosen, best, tuple(evaluate(chosen, fold.test))))
    return Rotation(tuple(out))


def tuned_on_all(configs: Sequence[C], groups: Sequence[str], score: Score[C],
                 evaluate: Evaluate[C]) -> tuple[C, list[Row]]:
    """The dev figure: chosen on every question and measured on the same ones."""
    every = list(range(len(groups)))
    chosen, _ = choose(configs, every, score)
    return chosen, list(evaluate(chosen, every))


def summary(rows: Sequence[Row], keys: Sequence[str]) -> dict[str, float]:
    """Means of ``keys`` over ``rows``, and their count as ``questions``."""
    return {k: mean_of(rows, k) for k in keys} | {"questions": float(len(rows))}
