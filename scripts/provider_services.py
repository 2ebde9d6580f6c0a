"""The real long-term memory providers memstream is tested against, as local services.

    python3 scripts/services.py up memos mem0
    python3 scripts/services.py down mem0 memos

- ``postgres``: PostgreSQL with pgvector, the binaries of the PyPI package
  ``pgserver`` (both bundled), on 127.0.0.1; as root it runs as the system user
  ``memstream-pg`` (PostgreSQL refuses root). Databases ``memos`` and ``mem0``,
  each with the ``vector`` extension.
- ``memos``: the MemOS server of the ``MemoryOS`` wheel (``memos.api.server_api``),
  unmodified, graph backend ``postgres``; its LLM and embedder are the project's
  OpenAI-compatible fake (``tests/fakes/openai.py``, run by
  ``scripts/fake_openai.py``, service ``fake-openai``). The ``gpt2`` tokenizer it
  loads at import (to count chunk sizes) is a stand-in generated locally
  (``scripts/tokenizer_standin.py``); ``HF_HUB_OFFLINE=1``.
- ``mem0``: the real ``mem0.Memory`` of the ``mem0ai`` wheel behind the three
  OSS REST routes memstream uses (``scripts/mem0_server.py``: the routing is
  ours, validation of filters, scoring and storage Mem0's), on the same
  Postgres, with the same fake model; telemetry off.

Each runs from a virtual environment of its own under ``$MEMSTREAM_CACHE``
(default ``~/.cache/memstream``), created once: a second start installs nothing.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path

MEMOS_VERSION = "2.0.32"
MEM0_VERSION = "2.0.18"
PGSERVER_VERSION = "0.1.4"
PG_USER = "memstream-pg"
EMBED_DIM = 64
DATABASES = ("memos", "mem0")


class Services:
    """What :mod:`services` lends this module: its state directory, ports and helpers."""

    def __init__(self, state: Path, cache: Path, ports: dict[str, int], *,
                 spawn: Callable[..., int], wait_until: Callable[..., None],
                 port_open: Callable[[int], bool], pid_of: Callable[[str], int | None],
                 log: Callable[[str], None]) -> None:
        self.state, self.cache, self.ports = state, cache, ports
        self.spawn, self.wait_until, self.port_open = spawn, wait_until, port_open
        self.pid_of, self.log = pid_of, log


def venv(s: Services, name: str, packages: list[str]) -> Path:
    """A virtual environment of its own, installed once (marked complete after)."""
    home = s.cache / name
    done = home / ".complete"
    if done.exists() and done.read_text() == " ".join(packages):
        return home
    s.log(f"installing {' '.join(packages)} into {home} (once)")
    if not (home / "bin" / "pip").exists():
        shutil.rmtree(home, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(home)], check=True)
    subprocess.run([str(home / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
                    *packages], check=True)
    done.write_text(" ".join(packages))
    return home


def memos_venv(s: Services) -> Path:
    # the server's imports beyond the wheel's own requirements (its extras, pinned as
    # the wheel pins them); chonkie 1.5 loads the tokenizer from the local cache
    return venv(s, "memos-venv", [
        f"MemoryOS=={MEMOS_VERSION}", "psycopg2-binary", f"pgserver=={PGSERVER_VERSION}",
        "chonkie==1.5.6", "jieba>=0.38.1,<0.42.1", "pika>=1.3.2,<2", "redis>=6.2,<7",
        "schedule>=1.2.2,<2", "tokenizers"])


def pg_bin(s: Services) -> Path:
    """PostgreSQL's binaries, copied from the pgserver package into the state
    directory, where the PostgreSQL user may read them (the cache may be in a
    home directory it cannot enter)."""
    site = s.state / "postgres" / "pgserver"
    here = site / "pgserver" / "pginstall" / "bin"
    if (here / "postgres").exists():
        return here
    home = memos_venv(s)
    found = list(home.glob("lib/python3*/site-packages/pgserver"))
    if not found:
        raise SystemExit(f"pgserver's binaries are missing under {home}")
    # the package and its bundled libraries, side by side (the binaries find the
    # libraries through a relative rpath)
    site.mkdir(parents=True, exist_ok=True)
    for part in ("pgserver", "pgserver.libs"):
        shutil.copytree(found[0].parent / part, site / part, symlinks=True)
    return here


def as_pg_user() -> list[str]:
    """The prefix that runs a command as the PostgreSQL user (root only)."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam(PG_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", PG_USER], check=True)
    return ["setpriv", f"--reuid={PG_USER}", f"--regid={PG_USER}", "--init-groups"]


def psql(s: Services, sql: str, database: str = "postgres") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(pg_bin(s) / "psql"), "-h", "127.0.0.1", "-p", str(s.ports["postgres"]),
         "-U", "postgres", "-d", database, "-v", "ON_ERROR_STOP=1", "-qAtc", sql],
        capture_output=True, text=True)


def postgres_up(s: Services) -> None:
    port = s.ports["postgres"]
    if s.pid_of("postgres") and s.port_open(port):
        s.log(f"postgres already running on 127.0.0.1:{port}")
        return
    bin_dir = pg_bin(s)
    d = s.state / "postgres"
    data = d / "data"
    d.mkdir(parents=True, exist_ok=True)
    prefix = as_pg_user()
    if prefix:  # the data directory is the user's; the binaries the user may read
        shutil.chown(d, PG_USER, PG_USER)
        if data.exists():
            shutil.chown(data, PG_USER, PG_USER)
        os.chmod(d, 0o755)
    if not (data / "PG_VERSION").exists():
        subprocess.run([*prefix, str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres",
                        "--auth=trust", "--encoding=utf8"], check=True,
                       stdout=subprocess.DEVNULL)
    s.spawn("postgres", [*prefix, str(bin_dir / "postgres"), "-D", str(data),
                         "-h", "127.0.0.1", "-p", str(port), "-k", str(d),
                         "-c", "max_connections=200", "-c", "fsync=off"])
    s.wait_until("postgres", lambda: s.port_open(port) and psql(s, "SELECT 1").returncode == 0,
                 60)
    for db in DATABASES:
        if psql(s, f"SELECT 1 FROM pg_database WHERE datname = '{db}'").stdout.strip() != "1":
            psql(s, f"CREATE DATABASE {db}")
        out = psql(s, "CREATE EXTENSION IF NOT EXISTS vector", db)
        if out.returncode:
            raise SystemExit(f"pgvector in {db}: {out.stderr}")
    s.log(f"postgres up on 127.0.0.1:{port} (user postgres, databases {', '.join(DATABASES)})")


def healthy(port: int) -> bool:
    """Whether the HTTP service on ``port`` answers ``GET /health`` with 200."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def memos_env(s: Services) -> dict[str, str]:
    """The server's settings: postgres graph, the fake model, nothing else enabled."""
    fake = f"http://127.0.0.1:{s.ports['fake-openai']}/v1"
    d = s.state / "memos"
    return {
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HOME": str(d / "hf"),
        "GRAPH_DB_BACKEND": "postgres", "POSTGRES_HOST": "127.0.0.1",
        "POSTGRES_PORT": str(s.ports["postgres"]), "POSTGRES_USER": "postgres",
        "POSTGRES_PASSWORD": "", "POSTGRES_DB": "memos", "EMBEDDING_DIMENSION": str(EMBED_DIM),
        "OPENAI_API_BASE": fake, "OPENAI_API_KEY": "fake", "MOS_CHAT_MODEL": "fake-model",
        "MOS_EMBEDDER_BACKEND": "universal_api", "MOS_EMBEDDER_PROVIDER": "openai",
        "MOS_EMBEDDER_API_BASE": fake, "MOS_EMBEDDER_API_KEY": "fake",
        "MOS_EMBEDDER_MODEL": "fake-embed", "MEMRADER_API_BASE": fake,
        "MEMRADER_API_KEY": "fake", "MEMRADER_MODEL": "fake-model",
        "MOS_ENABLE_SCHEDULER": "false", "ENABLE_PREFERENCE_MEMORY": "false",
        "MOS_ENABLE_REORGANIZE": "false", "ENABLE_INTERNET": "false",
        "MOS_USER_MANAGER_BACKEND": "sqlite", "FILE_LOCAL_PATH": str(d / "files"),
        "MOS_RERANKER_BACKEND": "cosine_local", "ASYNC_MODE": "sync",
        "HOME": str(d), "PYTHONUNBUFFERED": "1",
    }


def memos_up(s: Services, fake_openai_up: Callable[[], None]) -> None:
    port = s.ports["memos"]
    if s.pid_of("memos") and s.port_open(port):
        s.log(f"memos already running on 127.0.0.1:{port}")
        return
    fake_openai_up()
    postgres_up(s)
    home = memos_venv(s)
    d = s.state / "memos"
    (d / "files").mkdir(parents=True, exist_ok=True)
    root = Path(__file__).resolve().parent
    subprocess.run([str(home / "bin" / "python"), str(root / "tokenizer_standin.py"),
                    str(d / "hf")], check=True)
    s.spawn("memos", [str(home / "bin" / "python"), "-m", "uvicorn", "memos.api.server_api:app",
                      "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
            env=memos_env(s), cwd=d)

    s.wait_until("memos", lambda: healthy(port), 180)
    s.log(f"memos {MEMOS_VERSION} up on 127.0.0.1:{port} (postgres graph, fake model)")


def mem0_venv(s: Services) -> Path:
    return venv(s, "mem0-venv", [f"mem0ai=={MEM0_VERSION}", "psycopg2-binary", "fastapi",
                                 "uvicorn"])


def mem0_up(s: Services, fake_openai_up: Callable[[], None]) -> None:
    """The real ``mem0.Memory`` behind the OSS REST routes (``scripts/mem0_server.py``),
    on pgvector, with the fake model."""
    port = s.ports["mem0"]
    if s.pid_of("mem0") and s.port_open(port):
        s.log(f"mem0 already running on 127.0.0.1:{port}")
        return
    fake_openai_up()
    postgres_up(s)
    home = mem0_venv(s)
    d = s.state / "mem0"
    d.mkdir(parents=True, exist_ok=True)
    env = {"MEM0_TELEMETRY": "false", "MEM0_DIR": str(d), "HOME": str(d),
           "MEM0_MODEL_BASE_URL": f"http://127.0.0.1:{s.ports['fake-openai']}/v1",
           "MEM0_EMBEDDING_DIMS": str(EMBED_DIM), "POSTGRES_HOST": "127.0.0.1",
           "POSTGRES_PORT": str(s.ports["postgres"]), "POSTGRES_DB": "mem0",
           "POSTGRES_USER": "postgres", "MEM0_HISTORY_DB": str(d / "history.db"),
           "PYTHONUNBUFFERED": "1"}
    script = Path(__file__).resolve().parent / "mem0_server.py"
    s.spawn("mem0", [str(home / "bin" / "python"), str(script), "--port", str(port)], env=env,
            cwd=d)

    s.wait_until("mem0", lambda: healthy(port), 120)
    s.log(f"mem0 {MEM0_VERSION} up on 127.0.0.1:{port} (mem0.Memory on pgvector, fake model)")
