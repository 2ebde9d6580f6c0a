"""docs/stats-api.yaml for the tests: its parameters, and answers checked against
its component schemas (OpenAPI 3.1 schemas are JSON Schema 2020-12)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

SPEC_PATH = Path(__file__).resolve().parents[2] / "docs" / "stats-api.yaml"
SPEC_URI = "urn:memstream:stats-api"


@cache
def spec() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(SPEC_PATH.read_text())
    return doc


def resolve(node: dict[str, Any]) -> dict[str, Any]:
    """Follow a local ``$ref`` (``#/components/...``) of the document."""
    while "$ref" in node:
        target: Any = spec()
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def operation(path: str) -> dict[str, Any]:
    op: dict[str, Any] = spec()["paths"][path]["get"]
    return op


def parameters(path: str) -> dict[str, dict[str, Any]]:
    """The parameters of ``GET path`` by name, references resolved."""
    return {p["name"]: p for p in (resolve(x) for x in operation(path).get("parameters", []))}


def response_schema(path: str, status: str = "200") -> str:
    """The component name of the answer schema of ``GET path``."""
    resp = resolve(operation(path)["responses"][status])
    ref: str = resp["content"]["application/json"]["schema"]["$ref"]
    return ref.rsplit("/", 1)[-1]


@cache
def _registry() -> Registry[Any]:
    resource = Resource.from_contents(spec(), default_specification=DRAFT202012)
    return Registry().with_resource(SPEC_URI, resource)


def validator(schema: str) -> Draft202012Validator:
    return Draft202012Validator(
        {"$ref": f"{SPEC_URI}#/components/schemas/{schema}"}, registry=_registry(),
        format_checker=Draft202012Validator.FORMAT_CHECKER)


def check(body: Any, schema: str) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``body`` fits the component ``schema``."""
    validator(schema).validate(body)


def check_answer(path: str, status: int, body: Any) -> None:
    """``body`` fits what the document says ``GET path`` answers with ``status``."""
    check(body, response_schema(path, str(status)))
