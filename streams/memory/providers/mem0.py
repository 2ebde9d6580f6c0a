"""Mem0 provider: the Mem0 open-source REST server over HTTP.

Shapes follow the Mem0 OSS server of ``mem0ai`` 2.0.18 (``mem0ai/mem0``:
``server/main.py`` with its ``MemoryCreate`` / ``SearchRequest`` models,
``server/errors.py``, and ``Memory.add`` / ``Memory.search`` / ``Memory.delete`` in
``mem0/memory/main.py``), documented at docs.mem0.ai/open-source/features/rest-api.
The OSS server has no ``/v1`` prefix.

- ``add`` -> ``POST /memories`` ``{messages, user_id | agent_id, metadata, infer}``,
  one request per memory (metadata is per request). ``infer`` is ``false``:
  memstream has already judged, de-duplicated and conflict-checked the memory,
  so Mem0 must store the text as given rather than run its own extraction.
  The answer is ``{"results": [{"id", "memory", "event": "ADD", ...}]}``.
- ``search`` -> ``POST /search`` ``{query, filters, top_k, threshold}``, one
  request per cube (Mem0 needs an entity id at the top level of ``filters``, so
  two cubes cannot share one request). ``threshold`` is 0: Mem0's threshold
  is an absolute floor on a hybrid score, so the relativity is applied here,
  relative to the best hit (:mod:`streams.memory.rules.relative`); the
  answer is ``{"results": [{"id", "memory", "score", "metadata", "created_at", ...}]}``.
- ``expire`` -> ``DELETE /memories/{id}``; 404 (already gone) counts as done.
  Mem0 deletes; ``superseded_by`` is not kept.

Mapping of a result: ``score`` is the score, ``metadata`` gives type, scope,
importance, kind and source event ids, the event time is ``metadata.event_time``
or else ``created_at``; ``metadata.masked`` (the kinds of sensitive content masked
in it) is the record's ``metadata["masked"]``. Mem0 takes no client-chosen ids
either, so a retried add whose first answer was lost may store a copy (see the
MemOS provider).

Tenant isolation: Mem0 knows users and agents only. :func:`mem0_entity` is the
one mapping: the ``user_profile`` cube is stored under ``user_id
"{tenant}:{user}"``, an ``agent_{agentId}`` cube under ``agent_id
"{tenant}:{agentId}"``; ``metadata`` also carries ``tenant_id`` and ``cube``, the
search filters require both, and results whose metadata disagree are dropped.

Mem0 has no keyword-only switch, no preference bucket and no dedup option:
``keyword_only`` narrows the answer to memories sharing a keyword with the
query, ``include_preference=False`` drops preference memories, ``dedup`` drops
exact repeats. A 502 whose ``code`` is ``provider_auth_failed`` or
``provider_bad_request`` (Mem0's own model rejected the call) is permanent; other
502s, 429 and 5xx are retryable.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, cast
from urllib.parse import quote

import httpx

from streams.adapters.http.client import (
    DEFAULT_RETRY,
    RetryPolicy,
    bad_answer,
    keyword_match,
    read_masked,
    read_provider_time,
    send_json,
    with_retries,
)
from streams.memory.model import (
    MEMORY_TYPES,
    USER_CUBE,
    MemoryCandidate,
    MemoryType,
    StoredMemory,
    by_score,
)
from streams.memory.provider import (
    ProviderError,
    ProviderRequestRejected,
    ProviderUnavailable,
    Scope,
    SearchRequest,
    WriteResult,
)
from streams.memory.rules.relative import LEXICAL_WEIGHT, reranked_per_cube

log = logging.getLogger(__name__)
PERMANENT_UPSTREAM_CODES = frozenset({"provider_auth_failed", "provider_bad_request"})


def mem0_entity(scope: Scope, cube: str) -> dict[str, str]:
    """The Mem0 entity id for a memstream cube, qualified by tenant.

    ``user_profile`` -> ``{"user_id": "{tenant}:{user}"}``; ``agent_{agentId}`` ->
    ``{"agent_id": "{tenant}:{agentId}"}`` (the agent layer is shared by the
    agent's users); any other cube is kept under the user. Parts are
    percent-encoded, so ``:`` inside an id cannot make two tenants collide.
    """
    tenant = quote(scope.tenant_id, safe="")
    if cube.startswith("agent_") and cube != USER_CUBE:
        return {"agent_id": f"{tenant}:{quote(cube[len('agent_'):], safe='')}"}
    return {"user_id": f"{tenant}:{quote(scope.user_id, safe='')}"}


class Mem0Provider:
    """:class:`~streams.memory.provider.MemoryProvider` backed by a Mem0 OSS server."""

    def __init__(self, client: httpx.AsyncClient, base_url: str, *, api_key: str | None = None,
                 timeout_s: float = 10.0, retry: RetryPolicy = DEFAULT_RETRY,
                 name: str = "mem0", lexical_weight: float = LEXICAL_WEIGHT) -> None:
        self._client = client
        self._base = base_url.rstrip("/")
        self._headers = {"X-API-Key": api_key} if api_key else {}
        self._timeout_s = timeout_s
        self._retry = retry
        self.name = name
        self.lexical_weight = lexical_weight

    def _classify(self, operation: str, response: httpx.Response) -> ProviderError | None:
        """A 502 caused by Mem0's own model rejecting the call will not heal by retrying."""
        if response.status_code != 502:
            return None
        try:
            code = response.json().get("code")
        except (ValueError, AttributeError):
            return None
        if code in PERMANENT_UPSTREAM_CODES:
            return ProviderRequestRejected(f"{self.name} {operation}: HTTP 502 {code}",
                                           provider=self.name, operation=operation, status=502)
        return None

    async def _call(self, operation: str, method: str, path: str, body: Any = None,
                    allow_status: Sequence[int] = ()) -> Any:
        async def once() -> Any:
            return await send_json(
                self._client, method, f"{self._base}{path}", provider=self.name,
                operation=operation, decode=lambda answer: answer, body=body,
                headers=self._headers, timeout_s=self._timeout_s, allow_status=allow_status,
                classify_error=lambda response: self._classify(operation, response))

        def on_retry(attempt: int, err: ProviderError, delay: float) -> None:
            log.warning("%s %s attempt %d failed (%s); retrying in %.2fs",
                        self.name, operation, attempt, err, delay)

        return await with_retries(once, self._retry, on_retry=on_retry)

    # ------------------------------------------------------------------ add
    async def add(self, scope: Scope, cube: str,
                  memories: Sequence[MemoryCandidate]) -> WriteResult:
        entity = mem0_entity(scope, cube)
        written: list[str] = []
        for memory in memories:
            body: dict[str, Any] = {
                "messages": [{"role": "user" if memory.scope == "user" else "assistant",
                              "content": memory.content}],
                **entity,
                "metadata": {
                    "tenant_id": scope.tenant_id, "cube": cube, "type": memory.type,
                    "scope": memory.scope, "importance": memory.importance, "kind": memory.kind,
                    "source_event_ids": list(memory.source_event_ids),
                    "event_time": memory.event_time.isoformat() if memory.event_time else None,
                    **({"masked": list(memory.masked)} if memory.masked else {}),
                },
                "infer": False,
            }
            answer = await self._call("add", "POST", "/memories", body)
            results = answer.get("results") if isinstance(answer, dict) else None
            if not results or not isinstance(results[0], dict) or not results[0].get("id"):
                raise bad_answer(self.name, "add", "no results[0].id")
            written.append(str(results[0]["id"]))
        return WriteResult(ids=written)

    # --------------------------------------------------------------- search
    async def search(self, scope: Scope, request: SearchRequest) -> list[StoredMemory]:
        answers = await asyncio.gather(
            *(self._search_cube(scope, cube, request) for cube in request.cubes),
            return_exceptions=True,
        )
        found: dict[str, StoredMemory] = {}
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer
            for memory in answer:
                found.setdefault(memory.id, memory)
        results = list(found.values())
        if not request.include_preference:
            results = [m for m in results if m.type != "preference"]
        if request.keyword_only:
            results = [m for m in results if keyword_match(request.query, m.content)]
        if request.dedup:
            seen: set[str] = set()
            unique = []
            for m in sorted(results, key=by_score, reverse=True):
                if m.content.strip().lower() not in seen:
                    seen.add(m.content.strip().lower())
                    unique.append(m)
            results = unique
        return reranked_per_cube(
            request.query, sorted(results, key=by_score, reverse=True),
            request.relativity, lexical_weight=self.lexical_weight)

    async def _search_cube(self, scope: Scope, cube: str,
                           request: SearchRequest) -> list[StoredMemory]:
        entity = mem0_entity(scope, cube)
        body = {
            "query": request.query,
            "filters": {**entity, "tenant_id": scope.tenant_id, "cube": cube},
            "top_k": request.top_k,
            "threshold": 0.0,  # the relativity applies to the best hit, here
        }
        answer = await self._call("search", "POST", "/search", body)
        results = answer.get("results") if isinstance(answer, dict) else None
        if not isinstance(results, list):
            raise bad_answer(self.name, "search", "no results list")
        out = []
        for item in results:
            memory = self._stored(item, scope, cube, entity)
            if memory is not None:
                out.append(memory)
        return out

    def _stored(self, item: Any, scope: Scope, cube: str,
                entity: dict[str, str]) -> StoredMemory | None:
        if not isinstance(item, dict) or not item.get("id"):
            return None
        if not isinstance(item.get("memory"), str):
            return None
        meta = cast(dict[str, Any], item.get("metadata") if isinstance(item.get("metadata"), dict)
                    else {})
        # Isolation guard: only memories of this tenant, entity and cube.
        if meta.get("tenant_id") != scope.tenant_id or meta.get("cube") != cube:
            return None
        if any(k in item and item[k] != v for k, v in entity.items()):
            return None
        own_type = meta.get("type")
        score, importance = item.get("score"), meta.get("importance")
        sources = meta.get("source_event_ids")
        return StoredMemory(
            id=str(item["id"]),
            content=item["memory"],
            cube=cube,
            type=cast(MemoryType, own_type) if own_type in MEMORY_TYPES else "text",
            scope=meta["scope"] if meta.get("scope") in ("user", "agent")
            else ("user" if cube == USER_CUBE else "agent"),
            score=float(score) if isinstance(score, (int, float)) else 0.0,
            importance=float(importance) if isinstance(importance, (int, float)) else 0.5,
            event_time=(read_provider_time(meta.get("event_time"))
                        or read_provider_time(item.get("created_at"))),
            source_event_ids=tuple(str(s) for s in sources) if isinstance(sources, list) else (),
            kind="episode" if meta.get("kind") == "episode" else "fact",
            metadata={"provider": self.name, "created_at": item.get("created_at"),
                      **({"masked": masked} if (masked := read_masked(meta.get("masked")))
                         else {})},
        )

    # --------------------------------------------------------------- expire
    async def expire(self, scope: Scope, cube: str, memory_ids: Sequence[str],
                     superseded_by: str | None) -> None:
        for memory_id in memory_ids:
            await self._call("delete", "DELETE", f"/memories/{quote(memory_id, safe='')}",
                             allow_status=(404,))

    # --------------------------------------------------------------- erasure
    async def forget(self, scope: Scope, cube: str, memory_ids: Sequence[str]) -> int:
        """Delete by id; an id Mem0 does not know (404) counts nothing. Mem0 writes the
        text of a deleted memory into its history database (docs/providers.md)."""
        erased = 0
        for memory_id in dict.fromkeys(memory_ids):
            answer = await self._call("delete", "DELETE",
                                      f"/memories/{quote(memory_id, safe='')}",
                                      allow_status=(404,))
            erased += 1 if isinstance(answer, dict) and "message" in answer else 0  # not 404
        return erased

    async def forget_cube(self, scope: Scope, cube: str, *, max_rounds: int = 100) -> int:
        """Search the cube's entity and delete what it returns until nothing comes back;
        memories still found after their delete are a retryable error."""
        entity = mem0_entity(scope, cube)
        erased = 0
        previous: set[str] = set()
        for _ in range(max_rounds):
            answer = await self._call("erase", "POST", "/search", {
                "query": "memory", "filters": {**entity, "tenant_id": scope.tenant_id,
                                               "cube": cube},
                "top_k": 100, "threshold": 0.0})
            results = answer.get("results") if isinstance(answer, dict) else None
            found = {str(r["id"]) for r in results or [] if isinstance(r, dict) and r.get("id")}
            if not found:
                return erased
            if found & previous:
                raise ProviderUnavailable(f"{self.name} erase: memories still found after "
                                          "their delete", provider=self.name, operation="erase")
            erased += await self.forget(scope, cube, sorted(found))
            previous = found
        raise ProviderUnavailable(f"{self.name} erase: the cube was not empty after "
                                  f"{max_rounds} rounds", provider=self.name, operation="erase")
