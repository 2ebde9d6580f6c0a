"""Refuse ``MEMSTREAM_*`` environment variables that are no setting.

pydantic-settings ignores a variable it has no field for, so a mistyped name
(``MEMSTREAM_KAFKA__BROKERS``, or a setting under the wrong group such as
``MEMSTREAM_SESSION__IDLE_TIMEOUT_S``) would leave the default in force without
a word. Every ``memstream`` command checks the environment before it does
anything else (``streams/cli/main.py``) and refuses to start, naming each unknown
variable and the setting whose name is closest.

A few variables share the prefix without being settings; :data:`NOT_SETTINGS`
is the one list of them, with what reads each. Any other ``MEMSTREAM_*``
variable must be a setting of :class:`streams.settings.Settings`.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from pydantic import BaseModel

from streams.settings import Settings

# name -> what reads it
NOT_SETTINGS: Mapping[str, str] = {
    "MEMSTREAM_MIGRATIONS_DIR": "`streams/adapters/db/migrate.py`: the folder of the Alembic "
    "migrations",
    "MEMSTREAM_CACHE": "`streams/devtools/embedded_broker.py`, `scripts/`: where downloaded Kafka "
    "jars and tools are cached",
    "MEMSTREAM_KAFKA_VERSION": "`streams/devtools/embedded_broker.py`: the Apache Kafka version of "
    "the local broker",
    "MEMSTREAM_SERVICES_DIR": "`scripts/services.py`: state folder of `make services`",
    "MEMSTREAM_SETUP_NO_ROOT": "`scripts/setup.sh`: act as a user who is neither root nor "
    "allowed `sudo` (1, true or yes): name what is missing, install nothing",
    "MEMSTREAM_PROMETHEUS_CONFIG": "`scripts/services.py`: configuration of the test Prometheus",
    "MEMSTREAM_TEST_KAFKA_PORT": "`scripts/services.py`, `tests/`: port of the test Kafka",
    "MEMSTREAM_TEST_KAFKA_CONTROLLER_PORT": "`scripts/services.py`: controller port of the "
    "test Kafka",
    "MEMSTREAM_TEST_REDIS_PORT": "`scripts/services.py`, `tests/`: port of the test Redis",
    "MEMSTREAM_TEST_MYSQL_PORT": "`scripts/services.py`, `tests/`: port of the test MariaDB",
    "MEMSTREAM_TEST_PROMETHEUS_PORT": "`scripts/services.py`, `tests/`: port of the test "
    "Prometheus",
    "MEMSTREAM_TEST_POSTGRES_PORT": "`scripts/services.py`: port of the test PostgreSQL "
    "(pgvector) under MemOS and Mem0",
    "MEMSTREAM_TEST_FAKE_OPENAI_PORT": "`scripts/services.py`: port of the fake model of the "
    "real MemOS and Mem0",
    "MEMSTREAM_TEST_MEMOS_PORT": "`scripts/services.py`, `tests/`: port of the real MemOS server",
    "MEMSTREAM_TEST_MEM0_PORT": "`scripts/services.py`, `tests/`: port of the real Mem0 server",
    "MEMSTREAM_COMPOSE_VERSION": "`scripts/install-compose.sh`: the Docker Compose version built",
    "MEMSTREAM_JAEGER_VERSION": "`scripts/install-jaeger.sh`: the Jaeger module version built",
    "MEMSTREAM_JAEGER_LOCKED": "`scripts/install-jaeger.sh`: set by its background build, "
                               "which holds the build lock",
    "MEMSTREAM_TEST_JAEGER_PORT": "`scripts/services.py`, `tests/`: port of Jaeger's query API",
    "MEMSTREAM_TEST_JAEGER_OTLP_PORT": "`scripts/services.py`, `tests/`: port of Jaeger's "
                                      "OTLP/HTTP receiver",
    "MEMSTREAM_COMPOSE_KAFKA_PORT": "`docker-compose.yml`: host port of Kafka",
    "MEMSTREAM_COMPOSE_JAEGER_PORT": "`docker-compose.yml`: host port of Jaeger's UI "
                                     "(the tracing profile)",
    "MEMSTREAM_COMPOSE_OTLP_ENDPOINT": "`docker-compose.yml`: where the worker exports "
                                       "traces (empty: off)",
    "MEMSTREAM_COMPOSE_TRACES_SAMPLER": "`docker-compose.yml`: the worker's "
                                        "OTEL_TRACES_SAMPLER",
    "MEMSTREAM_COMPOSE_TRACES_SAMPLER_ARG": "`docker-compose.yml`: the worker's "
                                            "OTEL_TRACES_SAMPLER_ARG",
    "MEMSTREAM_COMPOSE_MYSQL_PORT": "`docker-compose.yml`: host port of MySQL",
    "MEMSTREAM_COMPOSE_REDIS_PORT": "`docker-compose.yml`: host port of Redis",
    "MEMSTREAM_COMPOSE_WEB_PORT": "`docker-compose.yml`: host port of the worker's web server",
    "MEMSTREAM_COMPOSE_PROMETHEUS_PORT": "`docker-compose.yml`: host port of Prometheus",
    "MEMSTREAM_COMPOSE_GRAFANA_PORT": "`docker-compose.yml`: host port of Grafana",
    "MEMSTREAM_COMPOSE_STATS_TOKEN": "`docker-compose.yml`: the /stats bearer token Grafana sends",
    "MEMSTREAM_COMPOSE_STATS_TOKENS": "`docker-compose.yml`: the worker's "
    "`MEMSTREAM_WEB__STATS_TOKENS`",
}

PREFIX: str = Settings.model_config.get("env_prefix") or ""
DELIMITER: str = Settings.model_config.get("env_nested_delimiter") or "__"
# difflib ratio below which a name is not offered as a suggestion
SUGGESTION_CUTOFF = 0.6


@dataclass(frozen=True)
class UnknownVariable:
    name: str
    suggestion: str | None  # the closest setting, if one is close enough


class UnknownSettingsError(ValueError):
    """The environment holds ``MEMSTREAM_*`` variables that are no setting."""

    def __init__(self, unknown: list[UnknownVariable]) -> None:
        self.unknown = unknown
        lines = [f"unknown {PREFIX}* environment variables (no such setting; "
                 "docs/configuration.md lists them all):"]
        for u in unknown:
            hint = f"did you mean {u.suggestion}?" if u.suggestion else "no setting is named alike"
            lines.append(f"  {u.name}: {hint}")
        super().__init__("\n".join(lines))


def setting_variables(model: type[BaseModel] = Settings, path: str = PREFIX) -> frozenset[str]:
    """The variable name of every setting of ``model``, upper case, groups included."""
    names: set[str] = set()
    for name, info in model.model_fields.items():
        key = f"{path}{name.upper()}"
        sub = info.annotation
        if isinstance(sub, type) and issubclass(sub, BaseModel):
            names |= setting_variables(sub, key + DELIMITER)
        else:
            names.add(key)
    return frozenset(names)


RENAMED = {
    # session ends are read as they come since; what bounded a batch bounds those pending
    "MEMSTREAM_CONSOLIDATION__BATCH_SIZE": "MEMSTREAM_CONSOLIDATION__MAX_PENDING",
}
"""Settings renamed in an upgrade (docs/upgrading.md): the old name, refused, points
at the new one."""


def closest_setting(name: str, known: Collection[str]) -> str | None:
    """The setting ``name`` most likely meant, or None when none is named alike.

    A renamed setting's new name (:data:`RENAMED`); under a real group, the
    closest name of that group; under a group that does not exist, the same name
    under the group named most alike (a mistyped group); else the closest name of
    all (difflib)."""
    if (new := RENAMED.get(name.upper())) is not None and new in known:
        return new
    rest = name.upper().removeprefix(PREFIX)
    by_rest = {k.upper().removeprefix(PREFIX): k for k in sorted(known)}
    group, sep, field = rest.partition(DELIMITER)
    if not sep:
        group = ""
    groups = {r.rpartition(DELIMITER)[0] for r in by_rest} - {""}
    if group in groups:
        within = [r for r in by_rest if r.startswith(group + DELIMITER)]
        match = difflib.get_close_matches(rest, within, n=1, cutoff=SUGGESTION_CUTOFF)
        if match:
            return by_rest[match[0]]
    elif group:
        same_field = [r for r in by_rest
                      if r.rpartition(DELIMITER)[0] and r.rpartition(DELIMITER)[2] == field]
        if same_field:
            best = max(same_field, key=lambda r: difflib.SequenceMatcher(
                None, group, r.rpartition(DELIMITER)[0]).ratio())
            return by_rest[best]
    match = difflib.get_close_matches(rest, list(by_rest), n=1, cutoff=SUGGESTION_CUTOFF)
    return by_rest[match[0]] if match else None


def unknown_variables(names: Iterable[str], known: Collection[str],
                      allowed: Collection[str] = NOT_SETTINGS.keys()) -> list[UnknownVariable]:
    """The ``MEMSTREAM_*`` names among ``names`` that are neither a setting in
    ``known`` nor ``allowed``, sorted. Names compare case-insensitively, as
    pydantic-settings reads them."""
    upper_known = {k.upper() for k in known}
    upper_allowed = {a.upper() for a in allowed}
    return [UnknownVariable(n, closest_setting(n, known)) for n in sorted(names)
            if n.upper().startswith(PREFIX)
            and n.upper() not in upper_known and n.upper() not in upper_allowed]


def check_environment(environ: Mapping[str, str]) -> None:
    """Raise :class:`UnknownSettingsError` when ``environ`` holds an unknown
    ``MEMSTREAM_*`` variable."""
    unknown = unknown_variables(environ, setting_variables())
    if unknown:
        raise UnknownSettingsError(unknown)
