"""Shared plumbing for the HTTP clients (MemOS, Mem0, OpenAI-compatible model).

Every external call goes through :func:`send_json`, which makes exactly one
attempt, records the Prometheus metrics and maps failures onto the provider
error tree of :mod:`streams.memory.provider`:

- ``httpx.TimeoutException`` -> :class:`ProviderTimeout` (retryable)
- any other ``httpx.TransportError`` (connect, read, write, remote protocol)
  -> :class:`ProviderUnavailable` (retryable)
- ``UnsupportedProtocol``, a local protocol error, an invalid URL
  -> :class:`ProviderRequestRejected` (permanent)
- HTTP 429 -> :class:`ProviderRateLimited` (retryable, honours ``Retry-After``)
- HTTP 5xx -> :class:`ProviderUnavailable` (retryable)
- any other non-2xx -> :class:`ProviderRequestRejected` (permanent)
- 2xx whose body is not JSON, or JSON of the wrong shape
  -> :class:`ProviderBadAnswer` (permanent)

Each client may refine this (a body ``code``, an error code inside a 429)
through the ``classify_error``/``decode`` hooks of :func:`send_json`.

:func:`with_retries` repeats an operation on :class:`RetryableProviderError`
only, with exponential backoff and jitter, and re-raises the last error when
the policy's attempts are used up. Metrics: ``PROVIDER_CALLS`` and
``PROVIDER_LATENCY`` per attempt, ``PROVIDER_FAILURES`` per failed attempt,
labelled by provider, operation and the error class name (all bounded).
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import httpx

from streams.backoff import Backoff
from streams.clock import aware_utc
from streams.memory.provider import (
    ProviderBadAnswer,
    ProviderError,
    ProviderRateLimited,
    ProviderRequestRejected,
    ProviderTimeout,
    ProviderUnavailable,
    RetryableProviderError,
)
from streams.metrics import PROVIDER_CALLS, PROVIDER_FAILURES, PROVIDER_LATENCY

T = TypeVar("T")
_BODY_EXCERPT = 300


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded exponential backoff: ``attempts`` and a :class:`~streams.backoff.Backoff`.

    The n-th retry (0-based) waits ``min(max_s, initial_s * multiplier**n)``;
    with ``jitter`` the wait is drawn uniformly from the upper half of that
    value, so concurrent clients spread out without retrying instantly.
    ``attempts`` counts the first call too: 3 means one call and two retries.
    """

    attempts: int = 3
    initial_s: float = 0.2
    max_s: float = 5.0
    multiplier: float = 2.0
    jitter: bool = True

    @property
    def backoff(self) -> Backoff:
        return Backoff(self.initial_s, self.max_s, self.multiplier,
                       jitter="half" if self.jitter else "none")

    def delay(self, retry_index: int, *, rng: Callable[[], float] = random.random) -> float:
        return self.backoff.delay(retry_index + 1, rng)


DEFAULT_RETRY = RetryPolicy()
OnRetry = Callable[[int, RetryableProviderError, float], None]


async def with_retries(
    op: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    on_retry: OnRetry | None = None,
) -> T:
    """Run ``op`` until it succeeds, a permanent error occurs, or attempts run out.

    ``on_retry(attempt, error, delay_s)`` is called before each wait, with the
    1-based number of the attempt that failed. A server-requested delay
    (``Retry-After``) is honoured up to ``policy.max_s``.
    """
    attempts = max(1, policy.attempts)
    for attempt in range(1, attempts + 1):
        try:
            return await op()
        except RetryableProviderError as err:
            if attempt >= attempts:
                raise
            delay = policy.delay(attempt - 1)
            requested = getattr(err, "retry_after_s", None)
            if isinstance(requested, (int, float)) and requested > delay:
                delay = min(float(requested), policy.max_s)
            if on_retry is not None:
                on_retry(attempt, err, delay)
            await sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


def map_transport_error(exc: Exception, provider: str, operation: str) -> ProviderError:
    """Map an exception raised while sending a request (not an HTTP status)."""
    name = type(exc).__name__
    text = f"{provider} {operation}: {name}: {exc}"
    if isinstance(exc, httpx.TimeoutException):
        return ProviderTimeout(text, provider=provider, operation=operation)
    if isinstance(exc, (httpx.UnsupportedProtocol, httpx.LocalProtocolError)):
        return ProviderRequestRejected(text, provider=provider, operation=operation)
    if isinstance(exc, httpx.TransportError):
        return ProviderUnavailable(text, provider=provider, operation=operation)
    return ProviderRequestRejected(text, provider=provider, operation=operation)


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def check_response(response: httpx.Response, provider: str, operation: str) -> Any:
    """The decoded JSON body of a 2xx response; otherwise the mapped error."""
    status = response.status_code
    if not 200 <= status < 300:
        excerpt = response.text[:_BODY_EXCERPT]
        text = f"{provider} {operation}: HTTP {status}: {excerpt}"
        if status == 429:
            raise ProviderRateLimited(text, provider=provider, operation=operation,
                                      status=status, retry_after_s=_retry_after(response))
        if status >= 500:
            raise ProviderUnavailable(text, provider=provider, operation=operation,
                                      status=status, retry_after_s=_retry_after(response))
        raise ProviderRequestRejected(text, provider=provider, operation=operation, status=status)
    try:
        return response.json()
    except ValueError as exc:
        excerpt = response.text[:_BODY_EXCERPT]
        raise ProviderBadAnswer(
            f"{provider} {operation}: HTTP {status} body is not JSON: {excerpt}",
            provider=provider, operation=operation, status=status,
        ) from exc


def bad_answer(provider: str, operation: str, what: str) -> ProviderBadAnswer:
    """The error for a JSON answer that does not have the documented shape."""
    return ProviderBadAnswer(f"{provider} {operation}: unexpected answer: {what}",
                             provider=provider, operation=operation)


ErrorHook = Callable[[httpx.Response], ProviderError | None]


async def send_json(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    provider: str,
    operation: str,
    decode: Callable[[Any], T],
    body: Any = None,
    headers: Mapping[str, str] | None = None,
    timeout_s: float,
    allow_status: Collection[int] = (),
    classify_error: ErrorHook | None = None,
) -> T:
    """One attempt: send, check the status, decode the JSON with ``decode``.

    ``decode`` runs inside the measured block, so an error it raises (a
    non-200 body code, a missing field) is counted as a failure of this call.
    A status in ``allow_status`` is not an error: ``decode`` receives its JSON
    body (or ``None``). ``classify_error`` may refine the mapping of a non-2xx
    response (return ``None`` to keep the default).
    """
    PROVIDER_CALLS.labels(provider, operation).inc()
    started = time.perf_counter()
    try:
        try:
            response = await client.request(method, url, json=body, headers=dict(headers or {}),
                                             timeout=timeout_s)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise map_transport_error(exc, provider, operation) from exc
        if response.status_code in allow_status:
            return decode(_json_or_none(response))
        if classify_error is not None and not 200 <= response.status_code < 300:
            refined = classify_error(response)
            if refined is not None:
                raise refined
        return decode(check_response(response, provider, operation))
    except ProviderError as err:
        PROVIDER_FAILURES.labels(provider, operation, type(err).__name__).inc()
        raise
    finally:
        PROVIDER_LATENCY.labels(provider, operation).observe(time.perf_counter() - started)


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def auth_headers(api_key: str | None, scheme: str = "Bearer") -> dict[str, str]:
    return {"Authorization": f"{scheme} {api_key}"} if api_key else {}


# ------------------------------------------------ shared result handling
_STOPWORD_TEXT = (
    "a an and are as at be been but by can could did do does for from had has have how i if in "
    "into is it its me my of on or our so that the their them then there these they this to "
    "was we were what when where which who whom whose why will with would you your"
)
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_WORD = re.compile(r"[0-9a-z]+(?:['’][a-z]+)?")
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")


def keyword_terms(text: str) -> set[str]:
    """Lexical terms for keyword-only matching: lower-cased words without
    stopwords, and character bigrams of CJK runs (single characters for runs
    of one)."""
    lowered = text.lower()
    terms = {w for w in _WORD.findall(lowered) if len(w) > 1 and w not in _STOPWORDS}
    for run in _CJK_RUN.findall(lowered):
        if len(run) == 1:
            terms.add(run)
        terms.update(run[i:i + 2] for i in range(len(run) - 1))
    return terms


def keyword_match(query: str, text: str) -> bool:
    """True when ``text`` shares at least one keyword term with ``query``."""
    wanted = keyword_terms(query)
    return bool(wanted) and not wanted.isdisjoint(keyword_terms(text))


def read_provider_time(value: object) -> datetime | None:
    """An aware datetime from an ISO-8601 string (naive values are taken as UTC)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return aware_utc(parsed)


def read_masked(value: object) -> list[str]:
    """The kinds of sensitive content masked in a memory, as memstream wrote them into
    a provider's metadata (a list of kind names); [] for anything else."""
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, str) and v]
