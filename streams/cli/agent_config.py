"""``memstream agent-config set|get|delete``: an agent's memory configuration.

``set --tenant T --agent A [--provider MEMOS|MEM0|MYSQL|none] [--open-long-memory on|off]
[--model NAME] [--sensitive KIND=ACTION ...]`` changes the given fields of the
current value (``--replace`` starts from the defaults) and produces it to the
compacted topic; every worker picks it up from there. ``get --tenant T [--agent A]``
prints the values and what the worker makes of them (route, long memory on or
off). ``delete`` produces a tombstone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from typing import Any

from aiokafka.errors import KafkaError

from streams.adapters.kafka.agent_config_topic import describe, merged, read_all, write
from streams.cli._common import fail, print_json
from streams.consolidation.rules.sensitive.kinds import Kind
from streams.consolidation.rules.sensitive.policy import Policy
from streams.memory.rules.routing import PROVIDERS, parse_agent_config, split_agent_config_key
from streams.settings import get_settings
from streams.wire.records import TENANT_PATTERN


def register(sub: Any) -> None:
    p = sub.add_parser("agent-config", help="set or show an agent's memory configuration")
    p.add_argument("action", choices=["set", "get", "delete"])
    p.add_argument("--tenant", required=True)
    p.add_argument("--agent", help="required for set and delete")
    p.add_argument("--provider", type=str.upper, choices=[*PROVIDERS, "NONE"],
                   help="long-term memory provider (NONE: unset, the built-in one)")
    p.add_argument("--open-long-memory", choices=["on", "off"])
    p.add_argument("--model", help="the model bound to the agent ('' to unset)")
    p.add_argument("--sensitive", metavar="KIND=ACTION", action="append",
                   help="the agent's sensitive-content policy, one kind a flag (kinds: "
                   f"{', '.join(k.value for k in Kind)}; actions: keep, mask, drop); it "
                   "replaces the agent's previous one; 'none' clears it")
    p.add_argument("--replace", action="store_true", help="start from the defaults")
    p.set_defaults(func=run)


def _validate(args: argparse.Namespace) -> str | None:
    if not re.fullmatch(TENANT_PATTERN, args.tenant):
        return f"invalid tenant id {args.tenant!r}"
    if args.action in ("set", "delete") and not args.agent:
        return f"{args.action} needs --agent"
    if args.action == "set" and not args.replace and args.provider is None \
            and args.open_long_memory is None and args.model is None and not args.sensitive:
        return "nothing to set: give --provider, --open-long-memory, --model or --sensitive"
    try:
        _sensitive(args.sensitive)
    except ValueError as exc:
        return str(exc)
    return None


def _sensitive(flags: list[str] | None) -> dict[str, str] | None:
    """The ``--sensitive`` flags as ``{kind: action}`` (None: not given, ``{}``: cleared);
    ``ValueError`` on an unknown kind or action."""
    if not flags:
        return None
    if flags == ["none"]:
        return {}
    pairs = dict(flag.partition("=")[::2] for flag in flags)
    Policy.of(pairs)  # raises on an unknown kind or action
    return pairs


async def _run(args: argparse.Namespace) -> int:
    s = get_settings()
    k, default = s.kafka, s.consolidation.default_long_memory
    values = await read_all(k)
    if args.action == "get":
        docs = []
        for key, raw in sorted(values.items()):
            try:
                tenant, agent = split_agent_config_key(key)
            except ValueError:
                continue
            if tenant == args.tenant and (args.agent is None or agent == args.agent) \
                    and raw is not None:
                docs.append(describe(tenant, agent, raw, default_long_memory=default))
        if args.agent is not None and not docs:
            docs.append(describe(args.tenant, args.agent, None, default_long_memory=default))
        print_json(docs[0] if args.agent is not None else docs)
        return 0
    key = f"{args.tenant}/{args.agent}"
    if args.action == "delete":
        await write(k, args.tenant, args.agent, None)
        print_json(describe(args.tenant, args.agent, None, default_long_memory=default))
        return 0
    raw = values.get(key)
    current = None if args.replace or raw is None else parse_agent_config(raw)
    provider = "" if args.provider is None else (None if args.provider == "NONE" else args.provider)
    config = merged(current, provider=provider,
                    open_long_memory=None if args.open_long_memory is None
                    else args.open_long_memory == "on", model=args.model,
                    sensitive=_sensitive(args.sensitive))
    await write(k, args.tenant, args.agent, config)
    print_json(describe(args.tenant, args.agent, json.dumps(config.to_dict()).encode(),
                        default_long_memory=default))
    if config.open_long_memory and not config.model:
        print("memstream: note: long memory stays off until a model is bound (--model)",
              file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    problem = _validate(args)
    if problem:
        return fail(problem, 2)
    try:
        return asyncio.run(_run(args))
    except KafkaError as exc:
        return fail(f"kafka: {exc}")
