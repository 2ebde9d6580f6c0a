"""OpenAI-compatible chat model and embeddings endpoint over HTTP.

Shapes follow the OpenAI API reference (``openai/openai-openapi``:
``CreateChatCompletionRequest`` / ``CreateChatCompletionResponse`` and
``CreateEmbeddingRequest`` / ``CreateEmbeddingResponse``), which vLLM, Ollama,
llama.cpp, LiteLLM and most hosted gateways accept:

- ``POST {base_url}/chat/completions`` ``{model, messages, temperature,
  max_tokens?, response_format?: {"type": "json_object"}}`` ->
  ``{choices: [{index, message: {role, content}, finish_reason}], usage:
  {prompt_tokens, completion_tokens, total_tokens}}``.
- ``POST {base_url}/embeddings`` ``{model, input: [str, ...], encoding_format:
  "float"}`` -> ``{data: [{index, embedding}], usage: {prompt_tokens}}``.

``base_url`` includes the version, e.g. ``http://host:8000/v1``. Errors use the
OpenAI envelope ``{"error": {message, type, code}}``; a 429 whose code is
``insufficient_quota`` is permanent (no retry can succeed), other 429s and 5xx
are retryable. Each call is metered by a :class:`~streams.model_usage.meter.ModelMeter`
(calls, failures, retries, latency, tokens and cost per tenant, agent, model and
purpose); tokens are the API's ``usage``, counted with cl100k_base when it has none.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from streams.adapters.http.client import (
    DEFAULT_RETRY,
    RetryPolicy,
    auth_headers,
    bad_answer,
    send_json,
    with_retries,
)
from streams.memory.provider import (
    ChatResult,
    EmptyModelAnswer,
    ModelCaller,
    ProviderError,
    ProviderRequestRejected,
)
from streams.model_usage.meter import ModelMeter

log = logging.getLogger(__name__)
PROVIDER = "openai_compat"


def _classify(operation: str, response: httpx.Response) -> ProviderError | None:
    if response.status_code != 429:
        return None
    try:
        code = response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None
    if code == "insufficient_quota":
        return ProviderRequestRejected(f"{PROVIDER} {operation}: HTTP 429 insufficient_quota",
                                       provider=PROVIDER, operation=operation, status=429)
    return None


async def _post(client: httpx.AsyncClient, url: str, body: dict[str, Any], *, operation: str,
                headers: dict[str, str], timeout_s: float, retry: RetryPolicy,
                retried: Callable[[], None]) -> Any:
    async def once() -> Any:
        return await send_json(client, "POST", url, provider=PROVIDER, operation=operation,
                               decode=lambda answer: answer, body=body, headers=headers,
                               timeout_s=timeout_s,
                               classify_error=lambda r: _classify(operation, r))

    def on_retry(attempt: int, err: ProviderError, delay: float) -> None:
        log.warning("%s %s attempt %d failed (%s); retrying in %.2fs",
                    PROVIDER, operation, attempt, err, delay)
        retried()

    return await with_retries(once, retry, on_retry=on_retry)


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


MAX_REPORTED_TOKENS = 10_000_000
"""A ``usage`` count above this (or negative, not finite, not a number) is no count:
the tokens are counted instead, so a buggy or hostile endpoint can neither break the
call nor spend a tenant's daily budget."""


def _reported(usage: dict[str, Any], name: str) -> int | None:
    """A token count of the API's ``usage``; None when it gives none worth taking."""
    value = usage.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or not 0 <= value <= MAX_REPORTED_TOKENS:
        return None
    return int(value)


def _text_of(answer: dict[str, Any]) -> str:
    """The first choice's content, or nothing."""
    choices = answer.get("choices")
    first = _obj(choices[0]) if isinstance(choices, list) and choices else {}
    content = _obj(first.get("message")).get("content")
    return content if isinstance(content, str) else ""


class ChatModel:
    """A chat-completions model (a :class:`~streams.memory.provider.ChatCompleter`);
    ``complete`` returns the first choice's text."""

    def __init__(self, client: httpx.AsyncClient, base_url: str, model: str, *,
                 api_key: str | None = None, timeout_s: float = 30.0,
                 retry: RetryPolicy = DEFAULT_RETRY, meter: ModelMeter | None = None) -> None:
        self._client = client
        self._url = f"{base_url.rstrip('/')}/chat/completions"
        self.model = model
        self._headers = auth_headers(api_key)
        self._timeout_s = timeout_s
        self._retry = retry
        self._meter = meter if meter is not None else ModelMeter()

    async def complete(self, messages: list[dict[str, str]], *, purpose: str,
                       caller: ModelCaller, temperature: float = 0.0,
                       max_tokens: int | None = None, json_mode: bool = False) -> ChatResult:
        """One completion. ``purpose`` (judge, conflict, summary) and ``caller`` label
        its usage; tokens absent from ``usage`` are counted.

        Raises :class:`EmptyModelAnswer` when there is no content to use.
        """
        with self._meter.call(caller, self.model, purpose) as call:
            return await self._complete(messages, call.retried, call.used, temperature,
                                        max_tokens, json_mode)

    async def _complete(self, messages: list[dict[str, str]], retried: Callable[[], None],
                        used: Callable[[int, int], None], temperature: float,
                        max_tokens: int | None, json_mode: bool) -> ChatResult:
        body: dict[str, Any] = {"model": self.model, "messages": messages,
                                "temperature": temperature}
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if json_mode:
            body["response_format"] = {"type": "json_object"}
        answer = await _post(self._client, self._url, body, operation="chat",
                             headers=self._headers, timeout_s=self._timeout_s, retry=self._retry,
                             retried=retried)
        if not isinstance(answer, dict):
            raise bad_answer(PROVIDER, "chat", "answer is not an object")
        usage = _obj(answer.get("usage"))
        prompt_tokens = _reported(usage, "prompt_tokens")
        if prompt_tokens is None:
            prompt_tokens = self._meter.count_chat(messages)
        completion_tokens = _reported(usage, "completion_tokens")
        if completion_tokens is None:
            completion_tokens = self._meter.count_texts([_text_of(answer)])
        used(prompt_tokens, completion_tokens)
        choices = answer.get("choices")
        if not isinstance(choices, list) or not choices:
            raise EmptyModelAnswer("model answered with no choices", provider=PROVIDER,
                                   operation="chat")
        first = _obj(choices[0])
        content = _obj(first.get("message")).get("content")
        if not isinstance(content, str) or not content.strip():
            raise EmptyModelAnswer(
                f"model answered without content (finish_reason={first.get('finish_reason')})",
                provider=PROVIDER, operation="chat")
        return ChatResult(text=content, prompt_tokens=prompt_tokens,
                          completion_tokens=completion_tokens)


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible ``/embeddings`` endpoint.

    Inputs are sent in batches of ``batch_size`` (the API takes at most 2,048
    per request); vectors come back in input order (sorted by ``index``) and
    must have ``dim`` components. Empty strings, which the API rejects, are sent
    as a single space.
    """

    def __init__(self, client: httpx.AsyncClient, base_url: str, model: str, *,
                 api_key: str | None = None, dim: int, timeout_s: float = 10.0,
                 retry: RetryPolicy = DEFAULT_RETRY, batch_size: int = 256,
                 meter: ModelMeter | None = None) -> None:
        self._client = client
        self._url = f"{base_url.rstrip('/')}/embeddings"
        self._meter = meter if meter is not None else ModelMeter()
        self.model = model
        self.name = f"openai:{model}"
        self.dim = dim
        self._headers = auth_headers(api_key)
        self._timeout_s = timeout_s
        self._retry = retry
        self._batch_size = max(1, min(batch_size, 2048))

    async def embed(self, texts: Sequence[str], *,
                    caller: ModelCaller | None = None) -> list[list[float]]:
        """One vector per text; each request is metered for ``caller`` (purpose ``embed``)."""
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            batch = [t if t.strip() else " " for t in texts[start:start + self._batch_size]]
            with self._meter.call(caller, self.model, "embed") as call:
                vectors.extend(await self._embed_batch(batch, call.retried, call.used))
        return vectors

    async def _embed_batch(self, batch: list[str], retried: Callable[[], None],
                           used: Callable[[int, int], None]) -> list[list[float]]:
        body = {"model": self.model, "input": batch, "encoding_format": "float"}
        answer = await _post(self._client, self._url, body, operation="embed",
                             headers=self._headers, timeout_s=self._timeout_s, retry=self._retry,
                             retried=retried)
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list) or len(data) != len(batch):
            raise bad_answer(PROVIDER, "embed", f"expected {len(batch)} embeddings")
        by_index: dict[int, list[float]] = {}
        for item in data:
            index = item.get("index") if isinstance(item, dict) else None
            vector = item.get("embedding") if isinstance(item, dict) else None
            if not isinstance(index, int) or not isinstance(vector, list):
                raise bad_answer(PROVIDER, "embed", "item without index/embedding")
            if len(vector) != self.dim:
                raise bad_answer(PROVIDER, "embed", f"dimension {len(vector)} != {self.dim}")
            by_index[index] = [float(x) for x in vector]
        if sorted(by_index) != list(range(len(batch))):
            raise bad_answer(PROVIDER, "embed", "indexes do not cover the input")
        prompt_tokens = _reported(_obj(answer.get("usage")), "prompt_tokens")
        used(prompt_tokens if prompt_tokens is not None else self._meter.count_texts(batch), 0)
        return [by_index[i] for i in range(len(batch))]
