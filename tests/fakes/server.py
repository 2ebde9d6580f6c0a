"""Run a fake HTTP service (an aiohttp application) for tests.

:class:`FakeServer` serves on 127.0.0.1 and a free port from a background
thread with its own event loop, so the same object works from sync tests
(``with FakeMemOS() as memos:``) and async tests (``async with``). Everything a
test touches (faults, the request log, the fake's state) is guarded by one
lock, so it is safe to call from any thread while requests are served.

Fault injection (applied before the request reaches the fake's handler, in the
order they were added; ``path`` limits a fault to one route):

- ``fail_next(n, status=500)`` — answer ``status`` with the API's error body
- ``rate_limit_next(n, retry_after=None)`` — HTTP 429 as the API sends it
- ``fail_code_next(n, code)`` — HTTP 200 whose body ``code`` is not 200 (APIs
  with a ``{code, message, data}`` envelope only)
- ``delay_next(n, seconds, process=True)`` — a slow server: wait, then handle
  the request normally (the client may already have timed out — the write
  still happens, as with a real server); ``process=False`` answers 504 instead
- ``fail_always(status=500)`` / ``recover()`` — an outage and its end

Every request (except the control routes) is recorded with its method, path,
headers, JSON body and the status answered: ``requests()``, ``bodies()``, ``count()``.

The fakes validate request bodies against the documented field lists and reject
unknown fields too (stricter than servers that silently ignore them), so a
misspelt field fails the test instead of being dropped.

Run as a process for a worker subprocess: ``python -m tests.fakes.memos --port N``
prints ``listening on http://127.0.0.1:N`` when ready. The same control is then
available over HTTP under ``/_fake/`` (see :class:`FakeControl`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import signal
import socket
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Self

import httpx
from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# The parsed JSON body of a request, set by the middleware for the handlers.
BODY: web.RequestKey[Any] = web.RequestKey("fake_json_body")


@dataclass
class Fault:
    kind: str  # "status" | "code" | "delay"
    remaining: int | None  # None: until recover()
    status: int = 500
    code: int = 50000
    message: str = "injected failure"
    seconds: float = 0.0
    process: bool = True
    path: str | None = None
    retry_after: float | None = None
    body: Any = None


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    json: Any
    status: int | None = None
    fault: str | None = None


# ----------------------------------------------------------- validation
@dataclass(frozen=True)
class Field:
    types: tuple[type, ...]
    required: bool = False
    choices: tuple[Any, ...] | None = None


def validate(body: Any, spec: Mapping[str, Field]) -> list[dict[str, Any]]:
    """FastAPI/pydantic-style error entries; empty when ``body`` fits ``spec``."""
    if not isinstance(body, dict):
        return [{"loc": ["body"], "msg": "Input should be a valid dictionary", "type": "dict_type"}]
    errors: list[dict[str, Any]] = []
    for key in body:
        if key not in spec:
            errors.append({"loc": ["body", key], "msg": "Extra inputs are not permitted",
                           "type": "extra_forbidden"})
    for key, f in spec.items():
        if key not in body:
            if f.required:
                errors.append({"loc": ["body", key], "msg": "Field required", "type": "missing"})
            continue
        value = body[key]
        if value is None and not f.required:
            continue
        if not _is_type(value, f.types):
            names = "/".join(t.__name__ for t in f.types)
            errors.append({"loc": ["body", key], "msg": f"Input should be {names}",
                           "type": "type_error"})
        elif f.choices is not None and value not in f.choices:
            errors.append({"loc": ["body", key], "msg": f"Input should be one of {f.choices}",
                           "type": "enum"})
    return errors


def _is_type(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in types
    if isinstance(value, int) and float in types:
        return True
    return isinstance(value, types)


# -------------------------------------------------------------- scoring
_TOKEN = re.compile(r"[0-9a-z]+|[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def tokens(text: str) -> set[str]:
    """Lower-cased words, and single CJK characters."""
    return set(_TOKEN.findall(text.lower()))


def overlap_score(query: str, text: str) -> float:
    """Token-set cosine in 0..1: how a fake ranks memories for a query."""
    q, t = tokens(query), tokens(text)
    if not q or not t:
        return 0.0
    return round(len(q & t) / math.sqrt(len(q) * len(t)), 6)


# --------------------------------------------------------------- server
class FakeServer:
    """Base of the fakes: lifecycle, faults, request log, control routes."""

    name = "fake"

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self._want_port = port
        self.port = 0
        self.lock = threading.RLock()
        self._faults: list[Fault] = []
        self._log: list[RecordedRequest] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    # ------------------------------------------------------- for subclasses
    def routes(self) -> list[web.RouteDef]:
        raise NotImplementedError

    def error_body(self, status: int, message: str) -> Any:
        return {"detail": message}

    def code_body(self, code: int, message: str) -> Any:
        raise NotImplementedError(f"{self.name} has no body code")

    def state(self) -> Any:
        """A JSON-able snapshot of the fake's data (for ``/_fake/state``)."""
        return None

    def reset(self) -> None:
        """Forget all data (subclasses clear their state, then call this)."""
        with self.lock:
            self._log.clear()
            self._faults.clear()

    # -------------------------------------------------------------- lifecycle
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> Self:
        ready = threading.Event()
        failure: list[BaseException] = []
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self._want_port))
        self.port = int(sock.getsockname()[1])

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._serve(sock))
            except BaseException as exc:  # reported to start()
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name=f"{self.name}-server", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self

    async def _serve(self, sock: socket.socket) -> None:
        app = web.Application(middlewares=[self._middleware], client_max_size=64 * 1024 * 1024)
        app.add_routes(self._control_routes())
        app.add_routes(self.routes())
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.SockSite(self._runner, sock).start()

    def stop(self) -> None:
        loop, runner = self._loop, self._runner
        if loop is None or runner is None:
            return
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop = self._runner = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)

    # ----------------------------------------------------------------- faults
    def _add(self, fault: Fault) -> None:
        with self.lock:
            self._faults.append(fault)

    def fail_next(self, n: int = 1, status: int = 500, *, path: str | None = None,
                  body: Any = None) -> None:
        self._add(Fault("status", n, status=status, path=path, body=body))

    def rate_limit_next(self, n: int = 1, *, retry_after: float | None = None,
                        path: str | None = None) -> None:
        self._add(Fault("status", n, status=429, path=path, retry_after=retry_after))

    def fail_code_next(self, n: int = 1, code: int = 50000, *, message: str = "injected failure",
                       path: str | None = None) -> None:
        self.code_body(code, message)  # raises for APIs without a body code
        self._add(Fault("code", n, code=code, message=message, path=path))

    def delay_next(self, n: int, seconds: float, *, path: str | None = None,
                   process: bool = True) -> None:
        self._add(Fault("delay", n, seconds=seconds, path=path, process=process))

    def fail_always(self, status: int = 500, *, path: str | None = None,
                    code: int | None = None) -> None:
        if code is not None:
            self.code_body(code, "injected failure")
            self._add(Fault("code", None, code=code, path=path))
        else:
            self._add(Fault("status", None, status=status, path=path))

    def recover(self) -> None:
        with self.lock:
            self._faults.clear()

    def _take_fault(self, path: str) -> Fault | None:
        with self.lock:
            for fault in self._faults:
                if fault.path is not None and fault.path != path:
                    continue
                if fault.remaining is not None:
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                return fault
        return None

    # ------------------------------------------------------------ request log
    def requests(self, path: str | None = None, method: str | None = None) -> list[RecordedRequest]:
        with self.lock:
            return [r for r in self._log if (path is None or r.path == path)
                    and (method is None or r.method == method.upper())]

    def bodies(self, path: str | None = None) -> list[Any]:
        return [r.json for r in self.requests(path)]

    def count(self, path: str | None = None) -> int:
        return len(self.requests(path))

    def clear_requests(self) -> None:
        with self.lock:
            self._log.clear()

    # ------------------------------------------------------------ middleware
    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith("/_fake/"):
            return await handler(request)
        raw = await request.read()
        try:
            parsed: Any = json.loads(raw) if raw else None
        except ValueError:
            parsed = raw.decode("utf-8", "replace")
        request[BODY] = parsed
        record = RecordedRequest(request.method, request.path, dict(request.query),
                                 dict(request.headers), parsed)
        with self.lock:
            self._log.append(record)
        fault = self._take_fault(request.path)
        response = await self._apply(fault, request, handler, record)
        record.status = response.status
        return response

    async def _apply(self, fault: Fault | None, request: web.Request, handler: Handler,
                     record: RecordedRequest) -> web.StreamResponse:
        if fault is not None:
            record.fault = fault.kind
        if fault is None:
            return await handler(request)
        if fault.kind == "delay":
            await asyncio.sleep(fault.seconds)
            if fault.process:
                return await handler(request)
            return web.json_response(self.error_body(504, "Gateway Timeout"), status=504)
        if fault.kind == "code":
            return web.json_response(self.code_body(fault.code, fault.message))
        headers = {}
        if fault.retry_after is not None:
            headers["Retry-After"] = str(fault.retry_after)
        body = fault.body if fault.body is not None else self.error_body(fault.status,
                                                                           fault.message)
        return web.json_response(body, status=fault.status, headers=headers)

    # --------------------------------------------------------- control routes
    def _control_routes(self) -> list[web.RouteDef]:
        async def fault(request: web.Request) -> web.Response:
            spec = await request.json()
            n = spec.pop("n", 1)
            always = spec.pop("always", False)
            self._add(Fault(remaining=None if always else n, **spec))
            return web.json_response({"ok": True})

        async def recover(_: web.Request) -> web.Response:
            self.recover()
            return web.json_response({"ok": True})

        async def log(_: web.Request) -> web.Response:
            return web.json_response([asdict(r) for r in self.requests()])

        async def clear(_: web.Request) -> web.Response:
            self.clear_requests()
            return web.json_response({"ok": True})

        async def state(_: web.Request) -> web.Response:
            return web.json_response(self.state())

        async def reset(_: web.Request) -> web.Response:
            self.reset()
            return web.json_response({"ok": True})

        return [web.post("/_fake/fault", fault), web.post("/_fake/recover", recover),
                web.get("/_fake/requests", log), web.delete("/_fake/requests", clear),
                web.get("/_fake/state", state), web.post("/_fake/reset", reset)]


def json_error(status: int, body: Any) -> web.Response:
    return web.json_response(body, status=status)


@dataclass
class FakeControl:
    """Drive a fake running in another process through its ``/_fake/`` routes."""

    url: str
    timeout_s: float = 5.0
    _client: httpx.Client = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._client = httpx.Client(base_url=self.url, timeout=self.timeout_s)

    def _fault(self, **spec: Any) -> None:
        self._client.post("/_fake/fault", json=spec).raise_for_status()

    def fail_next(self, n: int = 1, status: int = 500, *, path: str | None = None) -> None:
        self._fault(kind="status", n=n, status=status, path=path)

    def rate_limit_next(self, n: int = 1, *, retry_after: float | None = None,
                        path: str | None = None) -> None:
        self._fault(kind="status", n=n, status=429, path=path, retry_after=retry_after)

    def fail_code_next(self, n: int = 1, code: int = 50000, *, path: str | None = None) -> None:
        self._fault(kind="code", n=n, code=code, path=path)

    def delay_next(self, n: int, seconds: float, *, path: str | None = None,
                   process: bool = True) -> None:
        self._fault(kind="delay", n=n, seconds=seconds, path=path, process=process)

    def fail_always(self, status: int = 500, *, path: str | None = None) -> None:
        self._fault(kind="status", always=True, status=status, path=path)

    def recover(self) -> None:
        self._client.post("/_fake/recover").raise_for_status()

    def requests(self) -> list[dict[str, Any]]:
        answer: list[dict[str, Any]] = self._client.get("/_fake/requests").json()
        return answer

    def state(self) -> Any:
        return self._client.get("/_fake/state").json()

    def reset(self) -> None:
        self._client.post("/_fake/reset").raise_for_status()

    def close(self) -> None:
        self._client.close()


def main(factory: Callable[[argparse.Namespace], FakeServer], argv: list[str] | None = None,
         extra: Callable[[argparse.ArgumentParser], object] | None = None) -> None:
    """Entry point of ``python -m tests.fakes.<name> --port N``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    if extra is not None:
        extra(parser)
    args = parser.parse_args(argv)
    server = factory(args).start()
    print(f"listening on {server.url}", flush=True)
    stopped = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopped.set())
    stopped.wait()
    server.stop()
