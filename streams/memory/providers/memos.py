"""MemOS provider: the open-source MemOS product API over HTTP.

Shapes follow MemOS v2.0.31 (``MemTensor/MemOS``): the request models in
``src/memos/api/product_models.py`` (``APIADDRequest``, ``APISearchRequest``,
``DeleteMemoryRequest``), the handlers behind ``src/memos/api/routers/server_router.py``
and the API pages ``docs/en/open_source/open_source_api/core/{add,search,delete}_memory.md``
and ``help/error_codes.md``. Every answer is ``{code, message, data}``.

- ``add`` -> ``POST /product/add``, one request per memory, so the returned
  ``memory_id`` maps to its candidate and the memory's own metadata travels in
  ``info`` (which MemOS keeps in ``metadata.info`` and allows filtering on).
  The judged text goes as a pure text input item ``{"type": "text", "text": ...}``
  (the documented shape for content without a dialog), with
  ``async_mode="sync"`` and ``mode="fast"``: the call returns the ids, and MemOS
  stores the text as given instead of re-extracting it with its own model. The
  memory's type goes in ``info.memstream_type``: MemOS 2.0.32 deletes every
  ``info`` key named like a field of its memory items (``type`` is one), and
  keeps no ``custom_tags`` in fast mode.
- ``search`` -> ``POST /product/search`` with ``query, user_id, readable_cube_ids,
  mode, top_k, relativity, dedup, include_preference, pref_top_k``. ``dedup`` is
  always ``"no"``: the server's MMR answers nothing on its postgres backend
  (code 200, no memories); a deduplicating search is done here instead
  (:func:`diverse`). ``relativity`` is 0: the server applies it as an absolute
  floor (and scores a constant 0.5 under its default reranker), so the answer
  is ranked and cut here (:func:`~streams.memory.rules.relative.reranked_per_cube`:
  the server's order mixed with memstream's BM25 over the returned memories).
  ``text_mem`` / ``pref_mem`` / ``tool_mem`` / ``skill_mem`` buckets become
  :class:`StoredMemory`: the score is ``metadata.relativity``; the type comes from
  the bucket or ``memory_type`` (``PreferenceMemory`` -> preference,
  ``ToolSchemaMemory``/``ToolTrajectoryMemory`` -> tool, ``SkillMemory`` -> skill),
  and for plain text types (``LongTermMemory``, ``UserMemory``, ...) from the type
  memstream recorded in ``info.memstream_type``; the event time is ``info.event_time`` (when the
  source message was written) or else ``metadata.created_at``; the kinds of
  sensitive content masked in it, ``info.masked``, are ``metadata["masked"]``.
  Buckets of a cube the request did not name are dropped.
- ``expire`` -> ``POST /product/delete_memory`` with ``writable_cube_ids`` and
  ``memory_ids`` only (adding ``user_id`` would select a second delete mode,
  which MemOS refuses). MemOS deletes physically; ``superseded_by`` is not kept.

MemOS takes no client-chosen ids, so an add whose answer was lost (a timeout
after the server wrote) and is then retried can store the text twice. Such a
copy carries the same text and ``source_event_ids`` and can be found by search.

Keyword-only retrieval: the search API has no switch for it (BM25 and full-text
recall are server configuration, ``BM25_CALL`` / ``FULLTEXT_CALL``). With
``keyword_only`` the request uses ``mode="fast"`` (no model query rewriting) and
the answer is narrowed to memories sharing a keyword with the query.

Body codes (``code`` other than 200; see ``error_codes.md`` and the exception
handlers of ``src/memos/api/exceptions.py``):

- retryable, overload: 429, 40300 (call limit) -> :class:`ProviderRateLimited`
- retryable, server failure: 500-599, 50000, 50002, 50004, 50005, 50143, 50144
  -> :class:`ProviderUnavailable`
- everything else (400, 422, 4xxxx parameter/auth/quota, 501xx) -> permanent
  :class:`ProviderRequestRejected`

An add answers code 200 with ``data: []`` when the server's embedder failed:
retryable :class:`ProviderUnavailable`. With its database down it answers code
200 and a ``memory_id`` it never wrote. So with ``verify_writes`` (the default)
every add is read back before its id is returned: a search of the cube for the
memory's own text (one embedding and one vector query on the server) must
return that id, else the add fails with retryable :class:`ProviderUnavailable`
and nothing is recorded as stored; the writer's next attempt first looks the
memory up again (:class:`~streams.consolidation.writer.MemoryWriter` adopts it), so
a write that did land is not stored twice. A search whose
embedder failed answers code 200 with no memories, which cannot be told from a
search that found nothing.

A delete answers code 200 with ``data.status == "failure"`` when it failed:
"Failed to delete memories" (an exception on the server) is retryable, any
other failure message (a malformed request) permanent.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import quote

import httpx

from streams.adapters.http.client import (
    DEFAULT_RETRY,
    RetryPolicy,
    auth_headers,
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
)
from streams.memory.provider import (
    ProviderError,
    ProviderRateLimited,
    ProviderRequestRejected,
    ProviderUnavailable,
    Scope,
    SearchRequest,
    WriteResult,
)
from streams.memory.rules.mmr import Scored, mmr
from streams.memory.rules.relative import LEXICAL_WEIGHT, reranked_per_cube

log = logging.getLogger(__name__)
# where memstream keeps a memory's type in ``info``: MemOS deletes an ``info`` key
# named like a field of its memory items, and ``type`` is one
TYPE_KEY = "memstream_type"

RATE_LIMIT_CODES = frozenset({429, 40300})
SERVER_FAILURE_CODES = frozenset({50000, 50002, 50004, 50005, 50143, 50144})
_BUCKETS: dict[str, MemoryType | None] = {
    "text_mem": None, "pref_mem": "preference", "tool_mem": "tool", "skill_mem": "skill",
}
_MEMORY_TYPES: dict[str, MemoryType] = {
    "PreferenceMemory": "preference",
    "ToolSchemaMemory": "tool",
    "ToolTrajectoryMemory": "tool",
    "SkillMemory": "skill",
}


@dataclass(frozen=True)
class MemOSIds:
    user_id: str
    cube_id: str


def memos_ids(scope: Scope, cube: str) -> MemOSIds:
    """The MemOS user id and cube id for a memstream cube: the one tenant mapping.

    MemOS knows users and cubes, not tenants, so both are qualified by tenant:
    ``user_id = "{tenant}:{user}"``; the per-user ``user_profile`` cube becomes
    ``"{tenant}:{user}:user_profile"`` and any other cube (``agent_{agentId}``,
    shared by the agent's users) ``"{tenant}:{cube}"``. Each part is
    percent-encoded (``:`` and ``%`` included), so different tenants can never
    produce the same id.
    """
    tenant, user = _part(scope.tenant_id), _part(scope.user_id)
    cube_id = f"{tenant}:{user}:{_part(cube)}" if cube == USER_CUBE else f"{tenant}:{_part(cube)}"
    return MemOSIds(user_id=f"{tenant}:{user}", cube_id=cube_id)


def _part(value: str) -> str:
    return quote(value, safe="")


def code_error(code: object, message: str, provider: str, operation: str) -> ProviderError:
    """The error for a MemOS body ``code`` other than 200 (mapping in the module doc)."""
    text = f"{provider} {operation}: code {code}: {message[:300]}"
    if isinstance(code, int) and code in RATE_LIMIT_CODES:
        return ProviderRateLimited(text, provider=provider, operation=operation)
    if isinstance(code, int) and (500 <= code < 600 or code in SERVER_FAILURE_CODES):
        return ProviderUnavailable(text, provider=provider, operation=operation)
    return ProviderRequestRejected(text, provider=provider, operation=operation)


class MemOSProvider:
    """:class:`~streams.memory.provider.MemoryProvider` backed by a MemOS server."""

    def __init__(self, client: httpx.AsyncClient, base_url: str, *, api_key: str | None = None,
                 timeout_s: float = 10.0, retry: RetryPolicy = DEFAULT_RETRY,
                 mode: str = "fast", name: str = "memos", verify_writes: bool = True,
                 verify_top_k: int = 20, lexical_weight: float = LEXICAL_WEIGHT) -> None:
        self._client = client
        self._base = base_url.rstrip("/")
        self._headers = auth_headers(api_key, "Token")
        self._timeout_s = timeout_s
        self._retry = retry
        self.mode = mode
        self.name = name
        self.verify_writes = verify_writes
        self.verify_top_k = verify_top_k
        self.lexical_weight = lexical_weight

    async def _call(self, operation: str, path: str, body: dict[str, Any]) -> Any:
        """POST with retries; the ``data`` of a ``code == 200`` answer."""

        def decode(answer: Any) -> Any:
            if not isinstance(answer, dict) or "code" not in answer:
                raise bad_answer(self.name, operation, "no {code, message, data} envelope")
            message = str(answer.get("message", ""))
            if answer["code"] != 200:
                raise code_error(answer["code"], message, self.name, operation)
            data = answer.get("data")
            if isinstance(data, dict) and data.get("status") == "failure":
                raise _failure(message, self.name, operation)
            return data

        async def once() -> Any:
            return await send_json(self._client, "POST", f"{self._base}{path}",
                                   provider=self.name, operation=operation, decode=decode,
                                   body=body, headers=self._headers, timeout_s=self._timeout_s)

        def on_retry(attempt: int, err: ProviderError, delay: float) -> None:
            log.warning("%s %s attempt %d failed (%s); retrying in %.2fs",
                        self.name, operation, attempt, err, delay)

        return await with_retries(once, self._retry, on_retry=on_retry)

    # ------------------------------------------------------------------ add
    async def add(self, scope: Scope, cube: str,
                  memories: Sequence[MemoryCandidate]) -> WriteResult:
        ids = memos_ids(scope, cube)
        written: list[str] = []
        for memory in memories:
            info: dict[str, Any] = {
                "tenant_id": scope.tenant_id, "cube": cube, TYPE_KEY: memory.type,
                "scope": memory.scope, "importance": memory.importance, "kind": memory.kind,
                "source_event_ids": list(memory.source_event_ids),
                "event_time": memory.event_time.isoformat() if memory.event_time else None,
                **({"masked": list(memory.masked)} if memory.masked else {}),
            }
            body = {
                "user_id": ids.user_id,
                "writable_cube_ids": [ids.cube_id],
                "messages": [{"type": "text", "text": memory.content}],
                "async_mode": "sync",
                "mode": "fast",
                "custom_tags": ["memstream", f"type:{memory.type}", f"scope:{memory.scope}"],
                "info": info,
            }
            data = await self._call("add", "/product/add", body)
            memory_id = self._added_id(data, ids.cube_id)
            if self.verify_writes:
                await self._read_back(ids, memory.content, memory_id)
            written.append(memory_id)
        return WriteResult(ids=written)

    async def _read_back(self, ids: MemOSIds, content: str, memory_id: str) -> None:
        """Raise unless a search of the cube for ``content`` returns ``memory_id``."""
        body = {"query": content, "user_id": ids.user_id, "readable_cube_ids": [ids.cube_id],
                "mode": "fast", "top_k": self.verify_top_k, "relativity": 0.0, "dedup": "no",
                "include_preference": False}
        data = await self._call("verify", "/product/search", body)
        found = {str(item.get("id")) for key in _BUCKETS
                 for bucket in (data.get(key) or [] if isinstance(data, dict) else [])
                 if isinstance(bucket, dict) and bucket.get("cube_id") == ids.cube_id
                 for item in bucket.get("memories") or [] if isinstance(item, dict)}
        if memory_id not in found:
            raise ProviderUnavailable(
                f"{self.name} add: answered memory_id {memory_id}, which a search of its cube "
                "does not return (the server's database may be down); not recorded as stored",
                provider=self.name, operation="add")

    def _added_id(self, data: Any, cube_id: str) -> str:
        if data == []:  # how the server answers an add its embedder or database failed
            raise ProviderUnavailable(f"{self.name} add: answered success with no memory "
                                      "(the server's embedder or database failed)",
                                      provider=self.name, operation="add")
        items = [d for d in data or [] if isinstance(d, dict) and d.get("memory_id")]
        if not items:
            raise bad_answer(self.name, "add", "no memory_id in data")
        same_cube = [d for d in items if d.get("cube_id") == cube_id]
        return str((same_cube or items)[0]["memory_id"])

    # --------------------------------------------------------------- search
    async def search(self, scope: Scope, request: SearchRequest) -> list[StoredMemory]:
        if not request.cubes:
            return []
        qualified = {memos_ids(scope, cube).cube_id: cube for cube in request.cubes}
        body = {
            "query": request.query,
            "user_id": memos_ids(scope, USER_CUBE).user_id,
            "readable_cube_ids": list(qualified),
            "mode": "fast" if request.keyword_only else self.mode,
            "top_k": request.top_k,
            "relativity": 0.0,  # the relativity applies to the best hit, here
            "dedup": "no",
            "include_preference": request.include_preference,
            "pref_top_k": request.pref_top_k,
        }
        data = await self._call("search", "/product/search", body)
        if not isinstance(data, dict):
            raise bad_answer(self.name, "search", "data is not an object")
        lists: list[list[StoredMemory]] = []
        for key, bucket_type in _BUCKETS.items():
            for bucket in data.get(key) or []:
                if not isinstance(bucket, dict):
                    continue
                cube = qualified.get(str(bucket.get("cube_id")))
                if cube is None:  # a cube this request may not read: never returned
                    continue
                stored = (self._stored(item, cube, bucket_type)
                          for item in bucket.get("memories") or [])
                lists.append([m for m in stored if m is not None])
        first: dict[str, StoredMemory] = {}
        for m in _by_score(lists):
            first.setdefault(m.id, m)
        results = list(first.values())
        if request.keyword_only:
            results = [m for m in results if keyword_match(request.query, m.content)]
        results = reranked_per_cube(request.query, results, request.relativity,
                                    lexical_weight=self.lexical_weight)
        return diverse(results) if request.dedup else results

    def _stored(self, item: Any, cube: str, bucket_type: MemoryType | None) -> StoredMemory | None:
        if not isinstance(item, dict) or not item.get("id"):
            return None
        if not isinstance(item.get("memory"), str):
            return None
        meta = item.get("metadata") if isinstance(item.get("metadata"), dict) else {}
        meta = cast(dict[str, Any], meta)
        info = meta.get("info") if isinstance(meta.get("info"), dict) else {}
        info = cast(dict[str, Any], info)
        memos_type = str(meta.get("memory_type") or "")
        own_type = info.get(TYPE_KEY, info.get("type"))
        mem_type: MemoryType = (
            bucket_type or _MEMORY_TYPES.get(memos_type)
            or (cast(MemoryType, own_type) if own_type in MEMORY_TYPES else "text")
        )
        score = meta.get("relativity")
        importance = info.get("importance")
        sources = info.get("source_event_ids")
        return StoredMemory(
            id=str(item["id"]),
            content=item["memory"],
            cube=cube,
            type=mem_type,
            scope=info["scope"] if info.get("scope") in ("user", "agent")
            else ("user" if cube == USER_CUBE else "agent"),
            score=float(score) if isinstance(score, (int, float)) else 0.0,
            importance=float(importance) if isinstance(importance, (int, float)) else 0.5,
            event_time=(read_provider_time(info.get("event_time"))
                        or read_provider_time(meta.get("created_at"))),
            source_event_ids=tuple(str(s) for s in sources) if isinstance(sources, list) else (),
            kind="episode" if info.get("kind") == "episode" else "fact",
            metadata={"provider": self.name, "memory_type": memos_type,
                      "created_at": meta.get("created_at"),
                      **({"masked": masked} if (masked := read_masked(info.get("masked")))
                         else {})},
        )

    # --------------------------------------------------------------- expire
    async def expire(self, scope: Scope, cube: str, memory_ids: Sequence[str],
                     superseded_by: str | None) -> None:
        if not memory_ids:
            return
        body = {"writable_cube_ids": [memos_ids(scope, cube).cube_id],
                "memory_ids": list(memory_ids)}
        await self._call("delete", "/product/delete_memory", body)

    # --------------------------------------------------------------- erasure
    async def forget(self, scope: Scope, cube: str, memory_ids: Sequence[str]) -> int:
        """Delete by id (MemOS deletes physically; an unknown id is no error, and the
        server does not say how many it found: the ids given are counted)."""
        ids = list(dict.fromkeys(memory_ids))
        if ids:
            await self.expire(scope, cube, ids, None)
        return len(ids)

    async def forget_cube(self, scope: Scope, cube: str, *, max_rounds: int = 100) -> int:
        """Search the cube and delete what it returns until a search returns nothing. A
        delete answered success while the same memories come back (the server's
        database is down) is a retryable error, never taken as done."""
        ids = memos_ids(scope, cube)
        erased = 0
        previous: set[str] = set()
        for _ in range(max_rounds):
            found = await self._cube_ids(ids)
            if not found:
                return erased
            if found & previous:
                raise ProviderUnavailable(
                    f"{self.name} erase: memories still found after their delete (the "
                    "server's database may be down)", provider=self.name, operation="erase")
            await self._call("delete", "/product/delete_memory", {
                "writable_cube_ids": [ids.cube_id], "memory_ids": sorted(found)})
            erased += len(found)
            previous = found
        raise ProviderUnavailable(f"{self.name} erase: the cube was not empty after "
                                  f"{max_rounds} rounds", provider=self.name, operation="erase")

    async def _cube_ids(self, ids: MemOSIds, top_k: int = 100) -> set[str]:
        """Ids of memories of the cube a search returns (the server returns the whole
        cube, nearest first, whatever the query)."""
        body = {"query": "memory", "user_id": ids.user_id, "readable_cube_ids": [ids.cube_id],
                "mode": "fast", "top_k": top_k, "relativity": 0.0, "dedup": "no",
                "include_preference": True, "pref_top_k": top_k}
        data = await self._call("erase", "/product/search", body)
        return {str(item.get("id")) for key in _BUCKETS
                for bucket in (data.get(key) or [] if isinstance(data, dict) else [])
                if isinstance(bucket, dict) and bucket.get("cube_id") == ids.cube_id
                for item in bucket.get("memories") or []
                if isinstance(item, dict) and item.get("id")}


def _by_score(lists: Sequence[Sequence[StoredMemory]]) -> list[StoredMemory]:
    """The memories of all buckets, best score first; equal scores (the server's
    constant 0.5) taken in turns from each bucket's own order, nearest first, so
    that no cube or bucket goes first only for being listed first."""
    turns = [(i, n, m) for n, bucket in enumerate(lists) for i, m in enumerate(bucket)]
    return [m for _, _, m in sorted(turns, key=lambda t: (-t[2].score, t[0], t[1]))]


def diverse(found: Sequence[StoredMemory]) -> list[StoredMemory]:
    """What ``dedup`` asks for, done here: MemOS' own MMR (``dedup: "mmr"``) answers
    nothing on its postgres backend. Exact repeats of a text go (the best kept), and
    the rest is ordered by maximal marginal relevance over their words."""
    seen: set[str] = set()
    unique = []
    for m in found:
        if m.content not in seen:
            seen.add(m.content)
            unique.append(m)
    items = [Scored(m, m.score, m.content) for m in unique]
    return [s.item for s in mmr(items, len(items))]


def _failure(message: str, provider: str, operation: str) -> ProviderError:
    """``code == 200`` but ``data.status == "failure"`` (how delete reports errors)."""
    text = f"{provider} {operation}: status failure: {message[:300]}"
    if message.startswith("Failed to"):
        return ProviderUnavailable(text, provider=provider, operation=operation)
    return ProviderRequestRejected(text, provider=provider, operation=operation)
