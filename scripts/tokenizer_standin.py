"""A local stand-in for the ``gpt2`` tokenizer the MemOS server loads at start.

MemOS only counts tokens with it (to size text chunks); with no model hub
reachable it cannot start. This writes a byte-level BPE tokenizer, trained here
on a few sentences, into a Hugging Face cache laid out as the hub would leave
it (``<HF_HOME>/hub/models--gpt2/snapshots/<rev>/``), so that ``tokenizers`` and
``transformers`` find it with ``HF_HUB_OFFLINE=1``. Counts differ from the real
``gpt2`` by a small factor, which only changes where MemOS cuts long texts.

    python scripts/tokenizer_standin.py HF_HOME
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REVISION = "0000000000000000000000000000000000000000"
CORPUS = [
    "I live in Berlin and I love hiking in the mountains every summer.",
    "The assistant remembers what the user prefers: window seats, green tea, jazz.",
    "Memories are facts about the user and experience of the agent.",
    "0123456789 ,.;:!?'\"()[]{}<>/-_+=*&^%$#@~`|\\",
]


def write(hf_home: Path, repo: str = "gpt2") -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    base = hf_home / "hub" / f"models--{repo.replace('/', '--')}"
    snap = base / "snapshots" / REVISION
    if (snap / "tokenizer.json").exists():
        return snap
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 4, trainer)
    snap.mkdir(parents=True, exist_ok=True)
    tok.save(str(snap / "tokenizer.json"))
    (snap / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 1024,
        "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
        "unk_token": "<|endoftext|>"}))
    (snap / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (base / "refs").mkdir(parents=True, exist_ok=True)
    (base / "refs" / "main").write_text(REVISION)
    return snap


if __name__ == "__main__":
    home = Path(sys.argv[1])
    for name in ("gpt2", "openai-community/gpt2"):
        write(home, name)
    print(f"tokenizer stand-in in {home}")
