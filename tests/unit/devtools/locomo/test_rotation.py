"""Leave-one-conversation-out rotation: a fold never measures on what it tuned on."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from streams.devtools.locomo.rotation import (
    Row,
    choose,
    folds,
    mean_score,
    rotate,
    summary,
    tuned_on_all,
)

# three conversations, two questions each
GROUPS = ["a", "a", "b", "b", "c", "c"]
# per question, the figure each configuration earns: "fits_ab" is perfect on a and b and
# useless on c, "steady" is fair everywhere
FIGURE = {
    "fits_ab": [1.0, 1.0, 1.0, 1.0, 0.0, 0.0],
    "steady": [0.6, 0.6, 0.6, 0.6, 0.6, 0.6],
}
CONFIGS = ["steady", "fits_ab"]


class Spy:
    """An evaluation that records what it was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[int, ...]]] = []

    def __call__(self, config: str, idx: Sequence[int]) -> list[Row]:
        self.calls.append((config, tuple(idx)))
        return [{"score": FIGURE[config][i]} for i in idx]


def test_one_fold_per_conversation_holding_out_exactly_its_questions() -> None:
    fs = folds(GROUPS)
    assert [f.held_out for f in fs] == ["a", "b", "c"]
    for f in fs:
        assert not set(f.train) & set(f.test)
        assert sorted(f.train + f.test) == list(range(len(GROUPS)))
        assert {GROUPS[i] for i in f.test} == {f.held_out}
        assert f.held_out not in {GROUPS[i] for i in f.train}


def test_a_single_conversation_cannot_rotate() -> None:
    with pytest.raises(ValueError, match="two conversations"):
        folds(["a", "a"])


def test_choosing_sees_only_the_training_questions_and_measuring_only_the_held_out() -> None:
    spy = Spy()
    rot = rotate(CONFIGS, GROUPS, mean_score(spy, "score"), spy)
    calls = iter(spy.calls)
    for fr in rot.folds:
        for _ in CONFIGS:  # the choice: every configuration on the training questions
            config, idx = next(calls)
            assert idx == fr.fold.train
            assert not set(idx) & set(fr.fold.test)
        config, idx = next(calls)  # then the chosen one, on the held-out questions
        assert (config, idx) == (fr.chosen, fr.fold.test)
    assert next(calls, None) is None


def test_held_out_figures_use_the_choice_of_the_other_conversations() -> None:
    spy = Spy()
    rot = rotate(CONFIGS, GROUPS, mean_score(spy, "score"), spy)
    # holding a (or b) out, "fits_ab" is half useless on the rest: "steady" is chosen;
    # holding c out, "fits_ab" is perfect on a and b and is chosen, and scores 0 on c
    assert [f.chosen for f in rot.folds] == ["steady", "steady", "fits_ab"]
    held = [r["score"] for _, r in rot.held_out_rows()]
    assert held == [0.6, 0.6, 0.6, 0.6, 0.0, 0.0]
    assert summary([r for _, r in rot.held_out_rows()], ["score"])["score"] == pytest.approx(0.4)
    assert rot.chosen_counts() == {"steady": 2, "fits_ab": 1}
    # tuned and measured on all three, "fits_ab" wins with a figure the rotation shows is fitted
    chosen, rows = tuned_on_all(CONFIGS, GROUPS, mean_score(spy, "score"), spy)
    assert chosen == "fits_ab"
    assert summary(rows, ["score"])["score"] == pytest.approx(4 / 6)


def test_ties_go_to_the_first_configuration() -> None:
    def flat(config: str, idx: Sequence[int]) -> list[Row]:
        return [{"score": 0.5} for _ in idx]

    score = mean_score(flat, "score")
    assert choose(["shipped", "other"], [0, 1], score) == ("shipped", 0.5)
    assert choose(["other", "shipped"], [0, 1], score)[0] == "other"
