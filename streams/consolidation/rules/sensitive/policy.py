"""What happens to a memory holding sensitive content, per kind, and the rule
that applies it.

Per kind the action is ``keep`` (stored as said), ``mask`` (each span replaced
by the kind's placeholder, e.g. ``[CARD]``, the rest of the memory kept) or
``drop`` (the memory is not written). The default: credentials dropped,
payment data, national ids and contact data masked, names and places kept.
:func:`screen` returns the text to store (``None`` when dropped) and, per
kind found, what was done: never the text found.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from streams.consolidation.rules.sensitive.kinds import PLACEHOLDER, Finding, Kind, resolved


class Action(StrEnum):
    """What is done to a memory holding a kind."""

    KEEP = "keep"
    MASK = "mask"
    DROP = "drop"


DEFAULT_ACTIONS: Mapping[Kind, Action] = MappingProxyType({
    Kind.SECRET: Action.DROP,
    Kind.CARD: Action.MASK,
    Kind.IBAN: Action.MASK,
    Kind.NATIONAL_ID: Action.MASK,
    Kind.EMAIL: Action.MASK,
    Kind.PHONE: Action.MASK,
    Kind.IP: Action.MASK,
    Kind.NAME: Action.KEEP,
    Kind.LOCATION: Action.KEEP,
})


@dataclass(frozen=True)
class Policy:
    """One action per kind; a kind not named takes its default."""

    actions: Mapping[Kind, Action] = field(default_factory=lambda: DEFAULT_ACTIONS)

    def action(self, kind: Kind) -> Action:
        return self.actions.get(kind, DEFAULT_ACTIONS[kind])

    def acted_on(self) -> frozenset[Kind]:
        """The kinds this policy does not simply keep: the ones worth detecting."""
        return frozenset(k for k in Kind if self.action(k) is not Action.KEEP)

    @classmethod
    def of(cls, overrides: Mapping[str, str]) -> Policy:
        """The default policy with ``{"card": "drop", ...}`` applied; an unknown
        kind or action raises ``ValueError`` naming it."""
        actions = dict(DEFAULT_ACTIONS)
        for kind, action in overrides.items():
            try:
                actions[Kind(kind)] = Action(action)
            except ValueError:
                raise ValueError(f"sensitive policy: unknown kind or action {kind}={action}"
                                 ) from None
        return cls(MappingProxyType(actions))


DEFAULT_POLICY = Policy()


@dataclass(frozen=True)
class Screened:
    """What :func:`screen` made of a text: ``text`` to store, or ``None`` when the
    memory is dropped; ``done`` maps every kind found to the action taken."""

    text: str | None
    done: Mapping[Kind, Action]

    @property
    def dropped(self) -> bool:
        return self.text is None

    @property
    def masked(self) -> frozenset[Kind]:
        """The kinds whose spans were replaced (empty when dropped)."""
        return frozenset(k for k, a in self.done.items() if a is Action.MASK)


def screen(text: str, findings: list[Finding], policy: Policy = DEFAULT_POLICY) -> Screened:
    """Apply ``policy`` to ``text`` given what was found in it.

    Any kind whose action is ``drop`` drops the whole memory (the other kinds
    found are then reported as dropped too: nothing of it is stored).
    Otherwise each span of a ``mask`` kind becomes the kind's placeholder;
    overlapping masked findings are settled first (:func:`resolved`), and a
    kept finding never shields a masked one it overlaps.
    """
    kinds = {f.kind for f in findings}
    if any(policy.action(k) is Action.DROP for k in kinds):
        return Screened(None, MappingProxyType(dict.fromkeys(sorted(kinds), Action.DROP)))
    parts: list[str] = []
    at = 0
    for finding in resolved([f for f in findings if policy.action(f.kind) is Action.MASK]):
        parts += [text[at:finding.start], PLACEHOLDER[finding.kind]]
        at = finding.end
    parts.append(text[at:])
    done = {k: policy.action(k) for k in sorted(kinds)}
    return Screened("".join(parts), MappingProxyType(done))


_STRICTNESS = {Action.KEEP: 0, Action.MASK: 1, Action.DROP: 2}
_NAMED = 8  # refused entries named; the others are counted
_ENTRY_CHARS = 64


def _named(kind: str, action: str) -> str:
    """``"kind -> action"`` safe to log: each side ``repr()``-escaped where it holds
    anything but printable characters (no newline or control character reaches a log
    line), the whole cut to _ENTRY_CHARS."""
    kind, action = (s if s.isprintable() else repr(s) for s in (kind, action))
    return f"{kind} -> {action}"[:_ENTRY_CHARS]


def layered(base: Policy, overrides: Mapping[str, str], *,
            tighten_only: bool = False) -> tuple[Policy, list[str]]:
    """``base`` with each of ``overrides`` (``{"card": "drop", ...}``) applied that can
    be, and the ones that cannot, as ``"kind -> action"``: an unknown kind or action,
    or, with ``tighten_only``, an action that keeps more than ``base`` does for its
    kind (``keep`` < ``mask`` < ``drop``). One bad entry never voids the others.

    The refused entries are for a log line: control characters escaped, each cut to
    64 characters, the first 8 named and the rest as ``"and N more"``."""
    actions = {k: base.action(k) for k in Kind}
    refused: list[tuple[str, str]] = []
    for kind, action in overrides.items():
        try:
            k, a = Kind(kind), Action(action)
        except ValueError:
            refused.append((kind, action))
            continue
        if tighten_only and _STRICTNESS[a] < _STRICTNESS[actions[k]]:
            refused.append((kind, action))
            continue
        actions[k] = a
    named = [_named(kind, action) for kind, action in refused[:_NAMED]]
    if len(refused) > _NAMED:
        named.append(f"and {len(refused) - _NAMED} more")
    return Policy(MappingProxyType(actions)), named
