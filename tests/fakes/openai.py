"""A fake OpenAI-compatible endpoint: chat completions and embeddings under ``/v1``.

Shapes follow the OpenAI API reference (``CreateChatCompletionRequest/Response``,
``CreateEmbeddingRequest/Response``). Unknown request fields are rejected with
400 ``Unrecognized request argument supplied: <name>``, as the real API does;
errors use ``{"error": {message, type, param, code}}``.

Chat answers come, in this order, from the scripted queue (``script(...)``),
the ``handler`` callable, or ``default_reply``. An answer is a string (the
content), ``None`` (a message without content), :data:`NO_CHOICES` (an empty
``choices`` list) or a dict (sent as the whole response). ``usage`` counts
whitespace-separated words. Embeddings are deterministic hashed bag-of-words
vectors, L2-normalised, of ``dim`` components (or ``dimensions`` if the request
asks); :func:`embed_text` computes the same vector in-process.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from aiohttp import web

from tests.fakes.server import BODY, FakeServer, Field, main, tokens, validate

NO_CHOICES = object()
ChatAnswer = Any  # str | None | NO_CHOICES | dict
CHAT_SPEC = {
    "model": Field((str,), required=True), "messages": Field((list,), required=True),
    "temperature": Field((float,)), "top_p": Field((float,)), "n": Field((int,)),
    "stream": Field((bool,)), "stream_options": Field((dict,)), "stop": Field((str, list)),
    "max_tokens": Field((int,)), "max_completion_tokens": Field((int,)),
    "presence_penalty": Field((float,)), "frequency_penalty": Field((float,)),
    "logit_bias": Field((dict,)), "logprobs": Field((bool,)), "top_logprobs": Field((int,)),
    "user": Field((str,)), "response_format": Field((dict,)), "seed": Field((int,)),
    "tools": Field((list,)), "tool_choice": Field((str, dict)),
    "parallel_tool_calls": Field((bool,)), "metadata": Field((dict,)), "store": Field((bool,)),
    "reasoning_effort": Field((str,)), "service_tier": Field((str,)),
}
EMBED_SPEC = {
    "model": Field((str,), required=True), "input": Field((str, list), required=True),
    "encoding_format": Field((str,), choices=("float", "base64")),
    "dimensions": Field((int,)), "user": Field((str,)),
}


def embed_text(text: str, dim: int) -> list[float]:
    """Hashed bag-of-words vector of ``text``, L2-normalised."""
    vector = [0.0] * dim
    for token in sorted(tokens(text)) or [text]:
        digest = hashlib.sha256(token.encode()).digest()
        index = int.from_bytes(digest[:4], "big") % dim
        vector[index] += 1.0 if digest[4] % 2 == 0 else -1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def _words(value: Any) -> int:
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, list):
        return sum(_words(v) for v in value)
    if isinstance(value, dict):
        return _words(value.get("content") or value.get("text") or "")
    return 0


class FakeOpenAI(FakeServer):
    name = "openai"

    def __init__(self, *, dim: int = 64, api_key: str | None = None,
                 handler: Callable[[dict[str, Any]], ChatAnswer] | None = None,
                 default_reply: ChatAnswer = "[]", host: str = "127.0.0.1",
                 port: int = 0) -> None:
        super().__init__(host=host, port=port)
        self.dim = dim
        self.api_key = api_key
        self.handler = handler
        self.default_reply = default_reply
        self.reverse_embeddings = False  # answer data in reverse order (clients sort by index)
        self._script: deque[ChatAnswer] = deque()

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def script(self, *answers: ChatAnswer) -> None:
        with self.lock:
            self._script.extend(answers)

    def chat_requests(self) -> list[dict[str, Any]]:
        return [r.json for r in self.requests("/v1/chat/completions")]

    def embedding_requests(self) -> list[dict[str, Any]]:
        return [r.json for r in self.requests("/v1/embeddings")]

    def reset(self) -> None:
        with self.lock:
            self._script.clear()
        super().reset()

    def error_body(self, status: int, message: str) -> Any:
        kind = {429: ("rate_limit_exceeded", "requests"), 401: ("invalid_api_key", None)}
        code, typ = kind.get(status, (None, "server_error" if status >= 500 else None))
        return {"error": {"message": message, "type": typ or "invalid_request_error",
                          "param": None, "code": code}}

    def _reject(self, message: str, status: int = 400, param: str | None = None) -> web.Response:
        return web.json_response({"error": {"message": message, "type": "invalid_request_error",
                                            "param": param, "code": None}}, status=status)

    def _check(self, request: web.Request, body: Any,
               spec: dict[str, Field]) -> web.Response | None:
        if self.api_key is not None and request.headers.get("Authorization") != (
                f"Bearer {self.api_key}"):
            return web.json_response(self.error_body(401, "Incorrect API key provided"),
                                     status=401)
        errors = validate(body, spec)
        if not errors:
            return None
        first = errors[0]
        key = str(first["loc"][-1])
        if first["type"] == "dict_type":
            return self._reject("We could not parse the JSON body of your request.")
        if first["type"] == "extra_forbidden":
            return self._reject(f"Unrecognized request argument supplied: {key}")
        if first["type"] == "missing":
            return self._reject(f"you must provide a {key} parameter", param=key)
        return self._reject(f"Invalid value for '{key}': {first['msg']}", param=key)

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/v1/chat/completions", self.chat),
                web.post("/v1/embeddings", self.embeddings)]

    async def chat(self, request: web.Request) -> web.Response:
        body = request[BODY]
        if (bad := self._check(request, body, CHAT_SPEC)) is not None:
            return bad
        if body.get("stream"):
            return self._reject("this fake does not stream", param="stream")
        messages = body["messages"]
        if not messages or any(not isinstance(m, dict) or m.get("role") not in
                               ("system", "developer", "user", "assistant", "tool")
                               for m in messages):
            return self._reject("Invalid 'messages'.", param="messages")
        fmt = body.get("response_format")
        if fmt is not None and fmt.get("type") not in ("text", "json_object", "json_schema"):
            return self._reject("Invalid 'response_format.type'.", param="response_format")
        with self.lock:
            scripted = self._script.popleft() if self._script else NO_SCRIPT
        answer = scripted if scripted is not NO_SCRIPT else (
            self.handler(body) if self.handler is not None else self.default_reply)
        if isinstance(answer, dict):
            return web.json_response(answer)
        prompt_tokens = _words(messages)
        completion_tokens = _words(answer) if isinstance(answer, str) else 0
        choices = [] if answer is NO_CHOICES else [{
            "index": 0, "message": {"role": "assistant", "content": answer, "refusal": None},
            "logprobs": None, "finish_reason": "stop"}]
        return web.json_response({
            "id": f"chatcmpl-{self.count('/v1/chat/completions')}", "object": "chat.completion",
            "created": int(time.time()), "model": body["model"], "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
            "system_fingerprint": None,
        })

    async def embeddings(self, request: web.Request) -> web.Response:
        body = request[BODY]
        if (bad := self._check(request, body, EMBED_SPEC)) is not None:
            return bad
        inputs = [body["input"]] if isinstance(body["input"], str) else body["input"]
        if not inputs or len(inputs) > 2048:
            return self._reject("'$.input' must have between 1 and 2048 items", param="input")
        if any(not isinstance(t, str) or t == "" for t in inputs):
            return self._reject("'$.input' is invalid: empty or non-string item", param="input")
        dim = body.get("dimensions") or self.dim
        data = [{"object": "embedding", "index": i, "embedding": embed_text(t, dim)}
                for i, t in enumerate(inputs)]
        if self.reverse_embeddings:
            data.reverse()
        used = _words(inputs)
        return web.json_response({"object": "list", "data": data, "model": body["model"],
                                  "usage": {"prompt_tokens": used, "total_tokens": used}})


NO_SCRIPT = object()


if __name__ == "__main__":
    main(lambda args: FakeOpenAI(host=args.host, port=args.port, dim=args.dim),
         extra=lambda p: p.add_argument("--dim", type=int, default=64))
