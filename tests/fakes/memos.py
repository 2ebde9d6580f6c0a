"""A fake MemOS product API (open-source server, v2.0.31 shapes).

Follows ``src/memos/api/product_models.py`` (``APIADDRequest``,
``APISearchRequest``, ``DeleteMemoryRequest``), the search/add/delete handlers and
``src/memos/api/exceptions.py`` of ``MemTensor/MemOS``:

- answers are ``{code, message, data}``; validation errors are HTTP 422 with
  ``{code: 422, message, detail, data: null}``; other injected failures carry
  ``{code: status, message, data: null}``; 429 is the rate-limit middleware's
  ``{detail, retry_after}`` with ``Retry-After``.
- memories live per cube; a pure text item or a plain string becomes a
  ``LongTermMemory``, a ``user`` chat message a ``UserMemory`` (the fast add
  pipeline). ``info`` is kept in ``metadata.info``, less the keys named like a
  field of the memory item (``type`` among them), as MemOS 2.0.32 does; custom
  tags are not kept in fast mode.
- ``dedup: "mmr"`` answers success with no memories, as the server on its
  postgres backend does (checked against the real server).
- ``embedder_down``: an add answers success with ``data: []`` and stores
  nothing, as the server does when its embedder fails.
- ``database_down``: as the server with its database stopped, an add answers
  success with a ``memory_id`` it never stores, a search success with no
  memories, a delete success while deleting nothing.
- search returns every memory of the cube (the server's vector search has no
  floor), ordered by token overlap with the query (the nearest first), each with
  ``metadata.relativity`` 0.5 (the constant score of the server's default
  ``cosine_local`` reranker on memories without embeddings); ``relativity`` is an
  absolute floor on that score, so any floor above 0.5 answers nothing. The
  buckets are ``text_mem`` / ``pref_mem`` / ``tool_mem`` / ``skill_mem``, per
  readable cube.
- delete needs exactly one mode (memory_ids, file_ids, or filter/user_id/session_id)
  and otherwise answers code 200 with ``data.status == "failure"``, as MemOS does;
  ``memory_ids`` are deleted in whatever cube they are: the server does not
  check them against ``writable_cube_ids``.

``seed()`` stores a memory directly, e.g. a ``PreferenceMemory`` that MemOS'
own extraction would have produced.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from tests.fakes.server import BODY, FakeServer, Field, main, overlap_score, validate

S, L, D, B, N, F = str, list, dict, bool, int, float
# the fields of the server's memory item metadata (an ``info`` key with one of these
# names is deleted by the server before it stores ``info``)
ITEM_FIELDS = frozenset({
    "user_id", "session_id", "status", "is_fast", "evolve_to", "version", "history",
    "working_binding", "type", "key", "confidence", "source", "tags", "visibility",
    "updated_at", "info", "internal_info", "covered_history", "memory_type", "sources",
    "created_at", "usage", "background", "file_ids", "embedding", "relativity", "id",
    "memory", "ref_id",
})
ADD_SPEC = {
    "user_id": Field((S,), required=True), "session_id": Field((S,)), "task_id": Field((S,)),
    "manager_user_id": Field((S,)), "project_id": Field((S,)),
    "writable_cube_ids": Field((L,), required=True),
    "async_mode": Field((S,), choices=("async", "sync")),
    "mode": Field((S,), choices=("fast", "fine")), "custom_tags": Field((L,)),
    "info": Field((D,)), "messages": Field((S, L), required=True), "chat_history": Field((L,)),
    "is_feedback": Field((B,)), "is_upload_skill": Field((B,)), "mem_cube_id": Field((S,)),
    "memory_content": Field((S,)), "doc_path": Field((S,)), "source": Field((S,)),
    "operation": Field((L,)),
}
SEARCH_SPEC = {
    "query": Field((S,), required=True), "user_id": Field((S,), required=True),
    "readable_cube_ids": Field((L,), required=True),
    "mode": Field((S,), choices=("fast", "fine", "mixture")), "session_id": Field((S,)),
    "top_k": Field((N,)), "relativity": Field((F,)),
    "dedup": Field((S,), choices=("no", "sim", "mmr")), "rerank": Field((B,)),
    "pref_top_k": Field((N,)), "include_preference": Field((B,)),
    "search_tool_memory": Field((B,)), "tool_mem_top_k": Field((N,)),
    "include_skill_memory": Field((B,)), "skill_mem_top_k": Field((N,)),
    "context_format": Field((S,)), "filter": Field((D,)), "internet_search": Field((B,)),
    "threshold": Field((F,)), "search_memory_type": Field((S,)), "reference_time": Field((S,)),
    "chat_history": Field((L,)), "mem_cube_id": Field((S,)), "moscube": Field((B,)),
    "operation": Field((L,)), "source": Field((S,)), "neighbor_discovery": Field((B,)),
}
DELETE_SPEC = {
    "writable_cube_ids": Field((L,), required=True), "memory_ids": Field((L,)),
    "file_ids": Field((L,)), "filter": Field((D,)), "user_id": Field((S,)),
    "session_id": Field((S,)), "conversation_id": Field((S,)), "auto_cleanup_working": Field((B,)),
}
# what the server's default reranker scores every memory without an embedding
CONSTANT_SCORE = 0.5
TEXT_TYPES = ("WorkingMemory", "LongTermMemory", "UserMemory", "OuterMemory", "RawFileMemory")
TOOL_TYPES = ("ToolSchemaMemory", "ToolTrajectoryMemory")
ROLES = ("user", "assistant", "system", "tool")


class FakeMemOS(FakeServer):
    name = "memos"

    def __init__(self, *, api_key: str | None = None, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        super().__init__(host=host, port=port)
        self.api_key = api_key
        self.cubes: dict[str, dict[str, dict[str, Any]]] = {}
        self.embedder_down = False  # the server's embedder failing: adds store nothing
        self.database_down = False  # the server's database stopped: success, nothing done

    # ------------------------------------------------------------- envelope
    def error_body(self, status: int, message: str) -> Any:
        if status == 429:
            return {"detail": "Too many requests. Please slow down.", "retry_after": 1}
        return {"code": status, "message": message, "data": None}

    def code_body(self, code: int, message: str) -> Any:
        return {"code": code, "message": message, "data": None}

    def _validate(self, request: web.Request, body: Any,
                  spec: dict[str, Field]) -> web.Response | None:
        errors = validate(body, spec)
        if errors:
            text = "; ".join(f"[{' -> '.join(map(str, e['loc']))}] {e['msg']}" for e in errors)
            return web.json_response({
                "code": 422, "detail": errors, "data": None,
                "message": f"Parameter validation error on {request.method} {request.path}: {text}",
            }, status=422)
        if self.api_key is not None:
            auth = request.headers.get("Authorization", "")
            if auth.split(" ", 1)[-1] != self.api_key:
                return web.json_response({"code": 401, "message": "Invalid API key",
                                          "data": None}, status=401)
        return None

    @staticmethod
    def ok(message: str, data: Any) -> web.Response:
        return web.json_response({"code": 200, "message": message, "data": data})

    # ---------------------------------------------------------------- state
    def seed(self, cube_id: str, memory: str, *, user_id: str = "", memory_type: str =
             "PreferenceMemory", info: dict[str, Any] | None = None,
             created_at: str | None = None) -> str:
        with self.lock:
            return self._store(cube_id, memory, memory_type, user_id, info or {}, [], created_at)

    def _store(self, cube_id: str, memory: str, memory_type: str, user_id: str,
               info: dict[str, Any], tags: list[str], created_at: str | None = None) -> str:
        memory_id = str(uuid.uuid4())
        now = datetime.now(UTC).isoformat()
        self.cubes.setdefault(cube_id, {})[memory_id] = {
            "id": memory_id, "memory": memory,
            "metadata": {
                "user_id": user_id, "session_id": "default_session", "status": "activated",
                "type": "fact", "key": memory[:30], "confidence": 0.99, "source": None,
                "tags": ["mode:fast", *tags], "visibility": None, "memory_type": memory_type,
                "sources": [], "embedding": [], "created_at": created_at or now,
                "updated_at": now, "usage": [], "background": "", "info": info,
            },
        }
        return memory_id

    def memories(self, cube_id: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            cubes = [cube_id] if cube_id is not None else list(self.cubes)
            return [dict(m, cube_id=c) for c in cubes for m in self.cubes.get(c, {}).values()]

    def state(self) -> Any:
        return self.memories()

    def reset(self) -> None:
        with self.lock:
            self.cubes.clear()
        super().reset()

    # --------------------------------------------------------------- routes
    def routes(self) -> list[web.RouteDef]:
        return [web.post("/product/add", self.add), web.post("/product/search", self.search),
                web.post("/product/delete_memory", self.delete)]

    async def add(self, request: web.Request) -> web.Response:
        body = request[BODY]
        if (bad := self._validate(request, body, ADD_SPEC)) is not None:
            return bad
        items = self._items(body["messages"])
        if items is None:
            return web.json_response({"code": 422, "message": "invalid messages", "data": None,
                                      "detail": []}, status=422)
        # as the server does: an info key named like a field of its memory items is
        # dropped, and fast mode keeps no custom tags
        info = {k: v for k, v in (body.get("info") or {}).items() if k not in ITEM_FIELDS}
        data: list[dict[str, Any]] = []
        if self.embedder_down:  # the server answers success and stores nothing
            return self.ok("Memory added successfully", data)
        if self.database_down:  # an id for every item, none of them stored
            return self.ok("Memory added successfully", [
                {"memory": text, "memory_id": str(uuid.uuid4()), "memory_type": memory_type,
                 "cube_id": cube_id}
                for cube_id in body["writable_cube_ids"] for text, memory_type in items])
        with self.lock:
            for cube_id in body["writable_cube_ids"]:
                for text, memory_type in items:
                    memory_id = self._store(cube_id, text, memory_type, body["user_id"], info,
                                            [])
                    data.append({"memory": text, "memory_id": memory_id,
                                 "memory_type": memory_type, "cube_id": cube_id})
        return self.ok("Memory added successfully", data)

    @staticmethod
    def _items(messages: Any) -> list[tuple[str, str]] | None:
        if isinstance(messages, str):
            return [(messages, "LongTermMemory")] if messages.strip() else []
        out = []
        for m in messages:
            if not isinstance(m, dict):
                return None
            if m.get("type") == "text" and isinstance(m.get("text"), str):
                if set(m) - {"type", "text"}:
                    return None
                out.append((m["text"].strip(), "LongTermMemory"))
            elif m.get("role") in ROLES and isinstance(m.get("content"), str):
                if set(m) - {"role", "content", "chat_time", "message_id", "name"}:
                    return None
                if m["role"] != "system":
                    out.append((m["content"], "UserMemory" if m["role"] == "user"
                                else "LongTermMemory"))
            else:
                return None
        return [(text, kind) for text, kind in out if text]

    async def search(self, request: web.Request) -> web.Response:
        body = request[BODY]
        if (bad := self._validate(request, body, SEARCH_SPEC)) is not None:
            return bad
        query, floor = body["query"], float(body.get("relativity", 0.45) or 0)
        dedup = body.get("dedup", "mmr")
        data: dict[str, Any] = {"text_mem": [], "act_mem": [], "para_mem": [], "pref_mem": [],
                                "pref_note": "", "tool_mem": [], "skill_mem": []}
        limits = {
            "text_mem": (TEXT_TYPES, int(body.get("top_k", 10))),
            "pref_mem": (("PreferenceMemory",), int(body.get("pref_top_k", 6))
                         if body.get("include_preference", True) else 0),
            "tool_mem": (TOOL_TYPES, int(body.get("tool_mem_top_k", 6))
                         if body.get("search_tool_memory", True) else 0),
            "skill_mem": (("SkillMemory",), int(body.get("skill_mem_top_k", 3))
                          if body.get("include_skill_memory", True) else 0),
        }
        with self.lock:
            for cube_id in body["readable_cube_ids"]:
                stored = [] if self.database_down else list(self.cubes.get(cube_id, {}).values())
                for key, (types, limit) in limits.items():
                    hits = self._rank(query, stored, types, floor, dedup)[:limit]
                    data[key].append({"cube_id": cube_id, "memories": hits,
                                      "total_nodes": len(hits)})
        return self.ok("Search completed successfully", data)

    @staticmethod
    def _rank(query: str, stored: list[dict[str, Any]], types: tuple[str, ...], floor: float,
              dedup: str | None) -> list[dict[str, Any]]:
        if floor > CONSTANT_SCORE:  # the floor is absolute, on the constant score
            return []
        scored = []
        for m in stored:
            if m["metadata"]["memory_type"] not in types:
                continue
            ref = f"[{m['id'].split('-')[0]}]"
            meta = dict(m["metadata"], relativity=CONSTANT_SCORE, id=m["id"], memory=m["memory"],
                        ref_id=ref)
            hit = {"id": m["id"], "memory": m["memory"], "metadata": meta, "ref_id": ref}
            scored.append((overlap_score(query, m["memory"]), hit))
        # the nearest first (stable: equally near memories keep their order)
        scored.sort(key=lambda pair: pair[0], reverse=True)
        return FakeMemOS._deduped([hit for _, hit in scored], dedup)

    @staticmethod
    def _deduped(scored: list[dict[str, Any]], dedup: str | None) -> list[dict[str, Any]]:
        if dedup == "mmr":  # the postgres backend's MMR fails on its own embeddings, and
            return []       # the handler answers success with nothing
        if dedup == "sim":
            seen: set[str] = set()
            unique = []
            for hit in scored:
                if hit["memory"] not in seen:
                    seen.add(hit["memory"])
                    unique.append(hit)
            scored = unique
        return scored

    async def delete(self, request: web.Request) -> web.Response:
        body = request[BODY]
        if (bad := self._validate(request, body, DELETE_SPEC)) is not None:
            return bad
        filter_mode = bool(body.get("filter")) or bool(
            body.get("user_id") or body.get("session_id") or body.get("conversation_id"))
        modes = [body.get("memory_ids") is not None, body.get("file_ids") is not None, filter_mode]
        if sum(modes) != 1:
            return self.ok("Exactly one delete mode must be provided: "
                           "memory_ids, file_ids, or filter/user_id/session_id.",
                           {"status": "failure"})
        if self.database_down:
            return self.ok("Memories deleted successfully", {"status": "success"})
        with self.lock:  # by id in any cube: the server does not check writable_cube_ids
            for cube in self.cubes.values():
                for memory_id in body.get("memory_ids") or []:
                    cube.pop(memory_id, None)
        return self.ok("Memories deleted successfully", {"status": "success"})


if __name__ == "__main__":
    main(lambda args: FakeMemOS(host=args.host, port=args.port))
