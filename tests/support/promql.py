"""PromQL expressions of the dashboards and alerting rules, and their data-bearing parts.

An alerting expression usually returns nothing while all is well (``up == 0``,
``... > 1000 and ...``, ``absent(up)``). To check that such an expression works
on live data, :func:`data_forms` takes it apart into the series it is built on:
each operand of ``and`` / ``or`` / ``unless``, without its threshold
comparison, and the argument of ``absent``. Each of those must return data.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = ROOT / "deploy" / "grafana" / "dashboards"
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"

_OPEN, _CLOSE = "([{", ")]}"


def _mask(expr: str) -> str:
    """``expr`` with everything nested in brackets or inside strings blanked out."""
    out, depth, quote = [], 0, ""
    i = 0
    while i < len(expr):
        c = expr[i]
        if quote:
            if c == "\\":
                out.append("  ")
                i += 2
                continue
            if c == quote:
                quote = ""
            out.append(" ")
        elif c in "\"'`":
            quote = c
            out.append(" ")
        elif c in _OPEN:
            depth += 1
            out.append(c if depth == 1 else " ")
        elif c in _CLOSE:
            out.append(c if depth == 1 else " ")
            depth -= 1
        else:
            out.append(c if depth == 0 else " ")
        i += 1
    return "".join(out)[: len(expr)]


def _skip_group(expr: str, i: int) -> int:
    """Index after a balanced ``( ... )`` starting at or after ``i`` (whitespace skipped)."""
    while i < len(expr) and expr[i].isspace():
        i += 1
    if i >= len(expr) or expr[i] != "(":
        return i
    depth = 0
    for j in range(i, len(expr)):
        depth += expr[j] == "("
        depth -= expr[j] == ")"
        if depth == 0:
            return j + 1
    raise ValueError(f"unbalanced parentheses in {expr!r}")


def split_set_operations(expr: str) -> list[str]:
    """The operands of top-level ``and`` / ``or`` / ``unless`` (modifiers dropped)."""
    masked = _mask(expr)
    parts, start = [], 0
    for m in re.finditer(r"\b(and|or|unless)\b", masked):
        if m.start() < start:
            continue
        parts.append(expr[start:m.start()])
        i = m.end()
        mod = re.match(r"\s*(on|ignoring)\b", expr[i:])
        if mod:
            i = _skip_group(expr, i + mod.end())
        grp = re.match(r"\s*(group_left|group_right)\b", expr[i:])
        if grp:
            i = _skip_group(expr, i + grp.end())
        start = i
    parts.append(expr[start:])
    return [p.strip() for p in parts if p.strip()]


def strip_comparison(expr: str) -> str:
    """The left side of a top-level comparison (``x > 0.05`` -> ``x``)."""
    m = re.search(r"==|!=|>=|<=|>|<", _mask(expr))
    return expr[: m.start()].strip() if m else expr.strip()


def unwrap_absent(expr: str) -> str:
    m = re.fullmatch(r"absent\s*\((.*)\)", expr.strip(), re.S)
    return m.group(1).strip() if m else expr.strip()


def data_forms(expr: str) -> list[str]:
    return [unwrap_absent(strip_comparison(p)) for p in split_set_operations(expr)]


def dashboard_expressions() -> list[tuple[str, str]]:
    """(where, expression) of every Prometheus query of every dashboard."""
    out = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        doc = json.loads(path.read_text())
        panels: list[dict[str, Any]] = []
        for p in doc.get("panels", []):
            panels.append(p)
            panels.extend(p.get("panels", []))
        for p in panels:
            for t in p.get("targets", []):
                if "expr" in t:
                    out.append((f"{path.name} / {p['title']} / {t['refId']}", t["expr"]))
    return out


def alert_expressions() -> list[tuple[str, str]]:
    doc = yaml.safe_load(ALERTS.read_text())
    return [(f"alerts.yml / {r['alert']}", r["expr"])
            for g in doc["groups"] for r in g["rules"] if "alert" in r]


def substitute(expr: str, variables: dict[str, str]) -> str:
    """Grafana's ``$variables`` replaced (longest names first)."""
    for name in sorted(variables, key=len, reverse=True):
        expr = expr.replace(name, variables[name])
    if "$" in expr:
        raise ValueError(f"unknown Grafana variable in {expr!r}")
    return expr
