"""A tiny random Llama in the Hugging Face layout (config.json, model.safetensors, tokenizer.json),
small enough to build and run in a second on the NumPy backend, with the real architecture:
grouped-query attention, Llama-3 rope scaling, tied embeddings and the Llama-3 special tokens."""
from __future__ import annotations

import json
import os
import tempfile

from .checkpoint import random_weights, write_safetensors
from .config import config_from_dict
from .tokenizer import BEGIN_OF_TEXT, END_OF_TEXT, EOT, train_tiny_tokenizer

# Sizes of the tiny model; every other field follows Llama-3.2-1B's config.json.
TINY_SIZES = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16}
TINY_VOCAB = 384
# Wider embeddings than a trained model's 0.02: the tiny model's logits are then well separated
# (greedy decoding does not hinge on float rounding) and greedy text does not just repeat a token
# (much wider tied embeddings make every token predict itself).
TINY_EMBED_STD = 0.1


def tiny_config_dict(vocab_size: int, bos: int, eos: list) -> dict:
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab_size,
        **TINY_SIZES, "hidden_act": "silu", "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
        # Llama-3's scaling with a short original context, so all three frequency bands occur
        "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "tie_word_embeddings": True, "max_position_embeddings": 2048, "attention_bias": False,
        "mlp_bias": False, "bos_token_id": bos, "eos_token_id": eos, "torch_dtype": "float32",
    }


def build_tiny_random(dest: str | None = None, seed: int = 0, vocab_size: int = TINY_VOCAB) -> str:
    """Write the tiny model into ``dest`` (a new temp dir when None) and return the folder."""
    if dest is None:
        dest = tempfile.mkdtemp(prefix="llama_tiny_random_")
    os.makedirs(dest, exist_ok=True)
    tok = train_tiny_tokenizer(vocab_size, os.path.join(dest, "tokenizer.json"))
    bos = tok.token_to_id(BEGIN_OF_TEXT)
    eos = [tok.token_to_id(END_OF_TEXT), tok.token_to_id(EOT)]
    raw = tiny_config_dict(tok.get_vocab_size(), bos, eos)
    with open(os.path.join(dest, "config.json"), "w", encoding="utf-8") as f:
        json.dump(raw, f, indent=2)
    with open(os.path.join(dest, "generation_config.json"), "w", encoding="utf-8") as f:
        json.dump({"bos_token_id": bos, "eos_token_id": eos}, f, indent=2)
    config = config_from_dict(raw, source="the tiny config")
    weights = random_weights(config, "float32", seed=seed, as_numpy=True, embed_std=TINY_EMBED_STD)
    write_safetensors(config, weights, os.path.join(dest, "model.safetensors"))
    return dest
