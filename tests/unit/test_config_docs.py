"""docs/configuration.md documents every setting with its real default."""

from __future__ import annotations

from pathlib import Path

from streams.cli.config_docs import render
from streams.settings import Settings

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_configuration_doc_is_current() -> None:
    assert DOC.read_text() == render(), "run `memstream config docs > docs/configuration.md`"


def test_every_setting_has_a_description() -> None:
    for group, field in Settings.model_fields.items():
        model = field.annotation
        fields = getattr(model, "model_fields", {group: field})
        for name, info in fields.items():
            assert info.description, f"{group}.{name} has no description"
