"""The Mem0 OSS REST routes memstream uses, served by the real ``mem0.Memory``.

The Mem0 REST server (``server/`` of the mem0 repository) is not in the
``mem0ai`` wheel; the library is. This thin app gives the library the three
routes memstream calls, with the request models of the OSS server:

- ``POST /memories`` ``{messages, user_id | agent_id | run_id, metadata, infer, ...}``
  -> ``Memory.add``; 400 without an entity id;
- ``POST /search`` ``{query, filters, top_k, threshold, ...}`` -> ``Memory.search``;
- ``DELETE /memories/{id}`` -> ``Memory.delete``; 404 when Mem0 does not know it.

Routing and request validation are this app's; filters, scoring, storage and
their errors are Mem0's (an exception of the library answers 500 with its
text, as the OSS server does). Storage is pgvector (``scripts/services.py up
postgres``); the LLM and the embedder are the project's OpenAI-compatible fake.
Telemetry is off.

    python scripts/mem0_server.py --port 18002   (in the mem0 virtual environment)
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "false")

import uvicorn  # noqa: E402
from fastapi import FastAPI, HTTPException  # noqa: E402
from fastapi.responses import JSONResponse  # noqa: E402
from mem0 import Memory  # noqa: E402
from pydantic import BaseModel  # noqa: E402

log = logging.getLogger("mem0-server")


class Message(BaseModel):
    role: str
    content: str


class MemoryCreate(BaseModel):
    messages: list[Message]
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    metadata: dict[str, Any] | None = None
    expiration_date: str | None = None
    infer: bool | None = None
    memory_type: str | None = None
    prompt: str | None = None


class SearchRequest(BaseModel):
    query: str
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    filters: dict[str, Any] | None = None
    top_k: int | None = None
    threshold: float | None = None
    explain: bool | None = None
    show_expired: bool | None = None


def config() -> dict[str, Any]:
    fake = os.environ["MEM0_MODEL_BASE_URL"]
    dim = int(os.environ.get("MEM0_EMBEDDING_DIMS", "64"))
    return {
        "version": "v1.1",
        "vector_store": {"provider": "pgvector", "config": {
            "host": os.environ.get("POSTGRES_HOST", "127.0.0.1"),
            "port": int(os.environ.get("POSTGRES_PORT", "5432")),
            "dbname": os.environ.get("POSTGRES_DB", "mem0"),
            "user": os.environ.get("POSTGRES_USER", "postgres"),
            "password": os.environ.get("POSTGRES_PASSWORD", ""),
            "collection_name": os.environ.get("POSTGRES_COLLECTION_NAME", "memories"),
            "embedding_model_dims": dim}},
        "llm": {"provider": "openai", "config": {
            "api_key": "fake", "openai_base_url": fake, "model": "fake-model"}},
        "embedder": {"provider": "openai", "config": {
            "api_key": "fake", "openai_base_url": fake, "model": "fake-embed",
            "embedding_dims": dim}},
        "history_db_path": os.environ.get("MEM0_HISTORY_DB", "history.db"),
    }


def create_app(memory: Any) -> FastAPI:
    app = FastAPI(title="Mem0 REST APIs (memstream's test server)")

    def failed(what: str, exc: Exception) -> HTTPException:
        log.exception("error in %s", what)
        return HTTPException(status_code=500, detail=str(exc))

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/memories")
    def add(req: MemoryCreate) -> JSONResponse:
        if not any((req.user_id, req.agent_id, req.run_id)):
            raise HTTPException(status_code=400, detail="At least one identifier (user_id, "
                                "agent_id, run_id) is required.")
        params = {k: v for k, v in req.model_dump().items() if v is not None and k != "messages"}
        try:
            return JSONResponse(memory.add([m.model_dump() for m in req.messages], **params))
        except Exception as exc:
            raise failed("add", exc) from exc

    @app.post("/search")
    def search(req: SearchRequest) -> Any:
        params = {k: v for k, v in req.model_dump().items() if v is not None and k != "query"}
        try:
            return memory.search(query=req.query, **params)
        except ValueError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc
        except Exception as exc:
            raise failed("search", exc) from exc

    @app.delete("/memories/{memory_id}")
    def delete(memory_id: str) -> dict[str, str]:
        try:
            if memory.get(memory_id) is None:
                raise HTTPException(status_code=404,
                                    detail=f"Memory with id {memory_id} not found")
            memory.delete(memory_id=memory_id)
        except HTTPException:
            raise
        except Exception as exc:
            raise failed("delete", exc) from exc
        return {"message": "Memory deleted successfully"}

    return app


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=18002)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    uvicorn.run(create_app(Memory.from_config(config())), host=args.host, port=args.port,
                log_level="warning")
