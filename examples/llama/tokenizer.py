"""The Llama-3 chat prompt, stop ids, streaming detokenisation and the tiny tokenizer builder."""
from __future__ import annotations

import json
import os

from .config import LlamaConfig, ModelInputError

BEGIN_OF_TEXT = "<|begin_of_text|>"
END_OF_TEXT = "<|end_of_text|>"
START_HEADER = "<|start_header_id|>"
END_HEADER = "<|end_header_id|>"
EOT = "<|eot_id|>"
EOM = "<|eom_id|>"
LLAMA3_SPECIAL_TOKENS = (BEGIN_OF_TEXT, END_OF_TEXT, START_HEADER, END_HEADER, EOM, EOT)

DEFAULT_PROMPT = ("In one short paragraph, explain neural networks using the words layers, neurons, "
                  "learning, and data.")

# A small built-in corpus for the tiny tokenizer (byte-level BPE covers any text anyway).
TINY_CORPUS = """
A neural network is built from layers of neurons. Each neuron takes numbers from the layer before
it, multiplies them by weights, adds them up and passes the result through a simple function.
Learning means adjusting the weights so that the network's answers match the data: the network
makes a guess, measures how wrong it was, and nudges every weight a little in the direction that
reduces the error. With enough data and enough layers, the network learns patterns that nobody
wrote down by hand, such as the shape of a cat in a photo or the next word in a sentence.
A language model reads text as tokens and predicts the next token, one at a time. The attention
layers let every token look back at the tokens before it; the key and value cache keeps what was
already computed so that each new token costs only one more step. The compiler traces the model
into a graph, searches for the fastest kernels, and runs them on the device.
The quick brown fox jumps over the lazy dog. Numbers like 0 1 2 3 4 5 6 7 8 9 appear in data too.
"""


def llama3_chat_prompt(user_prompt: str) -> str:
    return (f"{BEGIN_OF_TEXT}{START_HEADER}user{END_HEADER}\n\n{user_prompt}{EOT}"
            f"{START_HEADER}assistant{END_HEADER}\n\n")


def load_tokenizer(model_dir: str):
    path = os.path.join(model_dir, "tokenizer.json")
    if not os.path.isfile(path):
        raise ModelInputError(
            f"{model_dir!r} has no tokenizer.json; download it with the checkpoint (Hugging Face "
            "layout), or use --random-weights, which needs no tokenizer")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ModelInputError("reading tokenizer.json needs the tokenizers package "
                              "(pip install tokenizers)") from None
    try:
        return Tokenizer.from_file(path)
    except Exception as e:  # the Rust library raises its own exception type
        raise ModelInputError(f"cannot read {path} ({e}); re-download tokenizer.json") from None


def stop_token_ids(config: LlamaConfig, tokenizer=None, model_dir: str | None = None) -> set:
    """<|eot_id|> and <|end_of_text|> from the tokenizer, plus every eos id the config and the
    generation config name."""
    ids = set(config.eos_token_ids)
    if model_dir:
        gen = os.path.join(model_dir, "generation_config.json")
        if os.path.isfile(gen):
            try:
                with open(gen, encoding="utf-8") as f:
                    eos = json.load(f).get("eos_token_id")
                ids.update(eos if isinstance(eos, list) else [eos] if eos is not None else [])
            except (OSError, ValueError):
                pass
    if tokenizer is not None:
        for tok in (EOT, END_OF_TEXT):
            i = tokenizer.token_to_id(tok)
            if i is not None:
                ids.add(int(i))
    return {int(i) for i in ids}


def encode_chat(tokenizer, user_prompt: str) -> list:
    return list(tokenizer.encode(llama3_chat_prompt(user_prompt), add_special_tokens=False).ids)


class StreamDecoder:
    """Turns generated ids into text pieces as they come. Byte-level BPE can split one UTF-8
    character over several tokens, so it decodes the whole tail and holds back a partial character."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.ids: list = []
        self.text = ""

    def push(self, token_id: int) -> str:
        self.ids.append(int(token_id))
        if self.tokenizer is None:
            piece = f" {token_id}" if self.ids[:-1] else str(token_id)
            self.text += piece
            return piece
        full = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        if full.endswith("\ufffd"):
            return ""
        piece, self.text = full[len(self.text):], full
        return piece

    def finish(self) -> str:
        """The held-back tail at the end of generation (an incomplete character decodes as U+FFFD)."""
        if self.tokenizer is None or not self.ids:
            return ""
        full = self.tokenizer.decode(self.ids, skip_special_tokens=True)
        piece, self.text = full[len(self.text):], full
        return piece


def train_tiny_tokenizer(vocab_size: int, path: str):
    """A byte-level BPE trained on TINY_CORPUS with the Llama-3 special tokens appended after the
    trained vocabulary (where Llama-3 keeps them); returns the Tokenizer and writes tokenizer.json."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    n_special = len(LLAMA3_SPECIAL_TOKENS)
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    if vocab_size < len(alphabet) + n_special + 1:
        raise ValueError(f"the tiny tokenizer needs vocab_size >= {len(alphabet) + n_special + 1}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - n_special, initial_alphabet=alphabet,
                                  show_progress=False)
    tok.train_from_iterator([line for line in TINY_CORPUS.splitlines() if line.strip()] * 4, trainer)
    tok.add_special_tokens(list(LLAMA3_SPECIAL_TOKENS))
    tok.save(path)
    return tok
