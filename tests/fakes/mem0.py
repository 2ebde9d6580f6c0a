"""A fake Mem0 open-source REST server (mem0ai 2.0.18 shapes).

Follows ``server/main.py`` and ``server/errors.py`` of ``mem0ai/mem0`` and the
``Memory.add`` / ``search`` / ``delete`` semantics of ``mem0/memory/main.py``:

- ``POST /memories`` ``{messages: [{role, content}], user_id?, agent_id?, run_id?,
  metadata?, infer?, ...}`` -> ``{"results": [{id, memory, event: "ADD", actor_id, role}]}``;
  400 when no entity id is given; identity keys inside ``metadata`` are dropped.
  Each non-system message becomes one memory (with ``infer`` true the real server
  would extract facts with its model; the fake stores the messages as given).
- ``POST /search`` ``{query, filters, top_k, threshold, ...}``: ``filters`` must
  hold ``user_id``, ``agent_id`` or ``run_id`` (400 otherwise); other keys match
  metadata (equality, ``eq/ne/in/nin/contains``, ``"*"``, ``AND/OR/NOT``). The score is
  the token overlap (0..1); ``threshold`` (default 0.1, 0..1) and ``top_k``
  (default 20) apply. Results carry ``id, memory, hash, score, created_at,
  updated_at``, the entity ids, ``role`` and ``metadata``.
- ``DELETE /memories/{id}``: ``{"message": ...}``, 404 when the id is unknown.
- errors: FastAPI 422 ``{"detail": [...]}``; 400/404 ``{"detail": "..."}``; 429
  ``{"error": "Rate limit exceeded: ..."}``; 502 ``{detail, code, request_id}``.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from tests.fakes.server import BODY, FakeServer, Field, main, overlap_score, validate

ENTITY_KEYS = ("user_id", "agent_id", "run_id")
CREATE_SPEC = {
    "messages": Field((list,), required=True), "user_id": Field((str,)),
    "agent_id": Field((str,)), "run_id": Field((str,)), "metadata": Field((dict,)),
    "expiration_date": Field((str,)), "infer": Field((bool,)), "memory_type": Field((str,)),
    "prompt": Field((str,)),
}
SEARCH_SPEC = {
    "query": Field((str,), required=True), "user_id": Field((str,)), "run_id": Field((str,)),
    "agent_id": Field((str,)), "filters": Field((dict,)), "top_k": Field((int,)),
    "threshold": Field((float,)), "explain": Field((bool,)), "show_expired": Field((bool,)),
}
UPSTREAM = {"provider_unavailable": "Provider is unreachable or returned a server error.",
            "provider_rate_limited": "Provider rate limit hit. Retry shortly.",
            "provider_auth_failed": "Provider rejected the request (authentication).",
            "provider_bad_request": "Provider rejected the request as malformed."}


def _matches(memory: dict[str, Any], filters: dict[str, Any]) -> bool:
    for key, want in filters.items():
        if key == "AND":
            if not all(_matches(memory, f) for f in want):
                return False
            continue
        if key == "OR":
            if not any(_matches(memory, f) for f in want):
                return False
            continue
        if key == "NOT":
            if any(_matches(memory, f) for f in want):
                return False
            continue
        have = memory.get(key) if key in ENTITY_KEYS else memory["metadata"].get(key)
        if not _compare(have, want):
            return False
    return True


def _compare(have: Any, want: Any) -> bool:
    if want == "*":
        return have is not None
    if not isinstance(want, dict):
        return bool(have == want)
    for op, v in want.items():
        text = have if isinstance(have, str) else None
        ok = {
            "eq": have == v, "ne": have != v,
            "in": isinstance(v, list) and have in v, "nin": isinstance(v, list) and have not in v,
            "contains": text is not None and str(v) in text,
            "icontains": text is not None and str(v).lower() in text.lower(),
        }.get(op, True)
        if not ok:
            return False
    return True


class FakeMem0(FakeServer):
    name = "mem0"

    def __init__(self, *, api_key: str | None = None, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        super().__init__(host=host, port=port)
        self.api_key = api_key
        self.store: dict[str, dict[str, Any]] = {}

    def error_body(self, status: int, message: str) -> Any:
        if status == 429:
            return {"error": "Rate limit exceeded: 60 per 1 minute"}
        if status == 502:
            return {"detail": UPSTREAM["provider_unavailable"], "code": "provider_unavailable",
                    "request_id": uuid.uuid4().hex[:8]}
        return {"detail": "Internal Server Error" if status >= 500 else message}

    def upstream_error_next(self, n: int = 1, code: str = "provider_unavailable") -> None:
        """HTTP 502 as Mem0 answers when its own model or store fails."""
        self.fail_next(n, 502, body={"detail": UPSTREAM.get(code, "Upstream provider error."),
                                     "code": code, "request_id": uuid.uuid4().hex[:8]})

    def _check(self, request: web.Request, body: Any,
               spec: dict[str, Field]) -> web.Response | None:
        if self.api_key is not None and request.headers.get("X-API-Key") != self.api_key:
            return web.json_response({"detail": "Authentication required. Provide a Bearer "
                                      "token or X-API-Key header."}, status=401)
        errors = validate(body, spec)
        if errors:
            return web.json_response({"detail": errors}, status=422)
        return None

    # ---------------------------------------------------------------- state
    def memories(self, **entity: str) -> list[dict[str, Any]]:
        with self.lock:
            return [dict(m) for m in self.store.values()
                    if all(m.get(k) == v for k, v in entity.items())]

    def state(self) -> Any:
        return self.memories()

    def reset(self) -> None:
        with self.lock:
            self.store.clear()
        super().reset()

    # --------------------------------------------------------------- routes
    def routes(self) -> list[web.RouteDef]:
        return [web.post("/memories", self.add), web.post("/search", self.search),
                web.delete("/memories/{memory_id}", self.delete)]

    async def add(self, request: web.Request) -> web.Response:
        body = request[BODY]
        if (bad := self._check(request, body, CREATE_SPEC)) is not None:
            return bad
        for m in body["messages"]:
            if not isinstance(m, dict) or set(m) - {"role", "content"} or not isinstance(
                    m.get("role"), str) or not isinstance(m.get("content"), str):
                return web.json_response({"detail": [{"loc": ["body", "messages"],
                                                      "msg": "invalid message"}]}, status=422)
        ids = {k: body[k] for k in ENTITY_KEYS if body.get(k)}
        if not ids:
            return web.json_response({"detail": "At least one identifier (user_id, agent_id, "
                                                "run_id) is required."}, status=400)
        if any(" " in v.strip() or not v.strip() for v in ids.values()):
            return web.json_response({"detail": "entity ids must not contain whitespace"},
                                     status=400)
        metadata = {k: v for k, v in (body.get("metadata") or {}).items() if k not in ENTITY_KEYS}
        results = []
        with self.lock:
            for m in body["messages"]:
                if m["role"] == "system":
                    continue
                now = datetime.now(UTC).isoformat()
                memory_id = str(uuid.uuid4())
                self.store[memory_id] = {
                    "id": memory_id, "memory": m["content"], **ids, "role": m["role"],
                    "hash": hashlib.md5(m["content"].encode()).hexdigest(),
                    "metadata": dict(metadata), "created_at": now, "updated_at": now,
                    "infer": body.get("infer", True),
                }
                results.append({"id": memory_id, "memory": m["content"], "event": "ADD",
                                "actor_id": None, "role": m["role"]})
        return web.json_response({"results": results})

    async def search(self, request: web.Request) -> web.Response:
        body = request[BODY]
        if (bad := self._check(request, body, SEARCH_SPEC)) is not None:
            return bad
        filters = dict(body.get("filters") or {})
        for key in ENTITY_KEYS:
            if body.get(key):
                filters[key] = body[key]
        if not any(k in filters for k in ENTITY_KEYS):
            return web.json_response({"detail": "filters must contain at least one of: user_id, "
                                      "agent_id, run_id. Example: filters={'user_id': 'u1'}"},
                                     status=400)
        threshold = body.get("threshold")
        threshold = 0.1 if threshold is None else threshold
        top_k = body.get("top_k")
        top_k = 20 if top_k is None else top_k
        if not 0 <= threshold <= 1 or top_k < 0:
            return web.json_response({"detail": "Invalid threshold or top_k"}, status=400)
        with self.lock:
            hits = []
            for m in self.store.values():
                if not _matches(m, filters):
                    continue
                score = overlap_score(body["query"], m["memory"])
                if score >= threshold and score > 0:
                    item = {k: v for k, v in m.items() if k != "infer"}
                    hits.append(dict(item, score=score))
        hits.sort(key=lambda h: h["score"], reverse=True)
        return web.json_response({"results": hits[:top_k]})

    async def delete(self, request: web.Request) -> web.Response:
        if (bad := self._check(request, {}, {})) is not None:
            return bad
        memory_id = request.match_info["memory_id"]
        with self.lock:
            if self.store.pop(memory_id, None) is None:
                return web.json_response({"detail": f"Memory with id {memory_id} not found"},
                                         status=404)
        return web.json_response({"message": "Memory deleted successfully"})


if __name__ == "__main__":
    main(lambda args: FakeMem0(host=args.host, port=args.port))
