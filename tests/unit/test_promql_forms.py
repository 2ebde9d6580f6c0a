"""Taking alerting expressions apart into the series they are built on."""

from __future__ import annotations

from tests.support.promql import (
    alert_expressions,
    dashboard_expressions,
    data_forms,
    split_set_operations,
    strip_comparison,
    substitute,
)


def test_operands_thresholds_and_absent() -> None:
    assert data_forms('up{job="memstream"} == 0') == ['up{job="memstream"}']
    assert data_forms('absent(up{job="memstream"})') == ['up{job="memstream"}']
    assert data_forms(
        "(time() - max by (job, instance) (p)) > 300\nand on (job, instance)\n"
        "sum by (job, instance) (lag) > 0"
    ) == ["(time() - max by (job, instance) (p))", "sum by (job, instance) (lag)"]
    assert data_forms("a / b > 0.05") == ["a / b"]
    assert data_forms("x or y unless ignoring (le) group_left (t) z") == ["x", "y", "z"]


def test_nothing_inside_brackets_or_strings_counts() -> None:
    expr = 'sum(rate(m{le=~"0|0\\\\.0", a!="b > c and d"}[5m])) / sum(rate(n[5m]))'
    assert split_set_operations(expr) == [expr]
    assert strip_comparison(expr) == expr
    assert data_forms("rate(standard_and_more[1m]) > 0") == ["rate(standard_and_more[1m])"]


def test_every_shipped_expression_has_forms() -> None:
    exprs = dashboard_expressions() + alert_expressions()
    assert len(exprs) >= 50
    variables = {"$__rate_interval": "1m", "$__interval": "1m", "$__range": "1h",
                 "$bucket": "1h"}
    for where, expr in exprs:
        forms = data_forms(substitute(expr, variables))
        assert forms and all(f for f in forms), where
        assert all("$" not in f for f in forms), where
