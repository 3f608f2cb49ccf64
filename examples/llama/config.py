"""The Llama configuration, read from a Hugging Face ``config.json`` and checked before any long work.

Every size the model uses comes from here (no constants for Llama-3.2-1B in the model code), and
the rotary frequencies, Llama-3 rope scaling included, are computed here once in float64.
"""
from __future__ import annotations

import dataclasses
import json
import math
import os

import numpy as np

SUPPORTED_ARCHITECTURES = ("LlamaForCausalLM",)
SUPPORTED_ROPE_TYPES = ("default", "llama3", "linear")


class ModelInputError(ValueError):
    """Bad input to the example (model files, config, prompt, dtype): the message says what to do."""


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: tuple | None  # sorted (key, value) pairs, hashable; None for plain RoPE
    tie_word_embeddings: bool
    max_position_embeddings: int
    bos_token_id: int | None
    eos_token_ids: tuple
    torch_dtype: str | None = None

    @property
    def kv_dim(self) -> int:
        return self.num_key_value_heads * self.head_dim

    @property
    def q_dim(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_groups(self) -> int:
        return self.num_attention_heads // self.num_key_value_heads

    def rope_scaling_dict(self) -> dict | None:
        return dict(self.rope_scaling) if self.rope_scaling is not None else None

    def num_parameters(self) -> int:
        h, i, v = self.hidden_size, self.intermediate_size, self.vocab_size
        per_layer = h * self.q_dim * 2 + h * self.kv_dim * 2 + 3 * h * i + 2 * h
        head = 0 if self.tie_word_embeddings else v * h
        return v * h + head + h + self.num_hidden_layers * per_layer

    def to_json_dict(self) -> dict:
        """A config.json in Hugging Face's layout (used by the tiny-random builder)."""
        out = {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "hidden_act": "silu",
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": self.rope_scaling_dict(),
            "tie_word_embeddings": self.tie_word_embeddings,
            "max_position_embeddings": self.max_position_embeddings,
            "attention_bias": False,
            "mlp_bias": False,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": list(self.eos_token_ids),
            "torch_dtype": self.torch_dtype or "float32",
        }
        return out


def llama_3_2_1b_config() -> LlamaConfig:
    """The published Llama-3.2-1B(-Instruct) config.json, for --random-weights (no download)."""
    return config_from_dict({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256,
        "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64, "hidden_act": "silu",
        "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
        "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"},
        "tie_word_embeddings": True, "max_position_embeddings": 131072, "bos_token_id": 128000,
        "eos_token_id": [128001, 128008, 128009], "torch_dtype": "bfloat16",
    }, source="the built-in Llama-3.2-1B config")


def load_config(model_dir: str) -> LlamaConfig:
    path = os.path.join(model_dir, "config.json")
    if not os.path.isfile(path):
        raise ModelInputError(
            f"{model_dir!r} has no config.json; point --model-dir at a Hugging Face Llama checkpoint "
            "folder (config.json, model.safetensors or model.safetensors.index.json, tokenizer.json), "
            "or use --repo, --tiny-random or --random-weights")
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ModelInputError(f"cannot read {path}: {e}; re-download the checkpoint's config.json") from None
    return config_from_dict(raw, source=path)


def _require(raw: dict, key: str, source: str, kind=int):
    if key not in raw or raw[key] is None:
        raise ModelInputError(f"{source} has no {key!r}; it does not look like a Llama config.json")
    try:
        return kind(raw[key])
    except (TypeError, ValueError):
        raise ModelInputError(f"{source}: {key!r} is {raw[key]!r}, expected a {kind.__name__}") from None


def config_from_dict(raw: dict, source: str = "config.json") -> LlamaConfig:
    """Validate a config.json dict: architecture, activations, biases, rope type, head sizes."""
    archs = raw.get("architectures") or []
    model_type = raw.get("model_type")
    if not any(a in SUPPORTED_ARCHITECTURES for a in archs) and model_type != "llama":
        raise ModelInputError(
            f"{source}: architecture {archs or model_type!r} is not supported; this example runs "
            f"{', '.join(SUPPORTED_ARCHITECTURES)} checkpoints (model_type 'llama'), for example "
            "unsloth/Llama-3.2-1B-Instruct")
    act = raw.get("hidden_act", "silu")
    if act != "silu":
        raise ModelInputError(f"{source}: hidden_act {act!r} is not supported (Llama uses 'silu')")
    for key in ("attention_bias", "mlp_bias"):
        if raw.get(key):
            raise ModelInputError(f"{source}: {key}=true is not supported (Llama has no biases)")
    hidden = _require(raw, "hidden_size", source)
    heads = _require(raw, "num_attention_heads", source)
    kv_heads = int(raw.get("num_key_value_heads") or heads)
    head_dim = int(raw.get("head_dim") or hidden // heads)
    if heads % kv_heads:
        raise ModelInputError(f"{source}: num_attention_heads {heads} is not a multiple of "
                              f"num_key_value_heads {kv_heads}")
    if head_dim % 2:
        raise ModelInputError(f"{source}: head_dim {head_dim} must be even for rotary embeddings")
    scaling = raw.get("rope_scaling")
    if scaling:
        rope_type = scaling.get("rope_type", scaling.get("type", "default"))
        if rope_type not in SUPPORTED_ROPE_TYPES:
            raise ModelInputError(
                f"{source}: rope_scaling type {rope_type!r} is not supported; supported: "
                f"{', '.join(SUPPORTED_ROPE_TYPES)}")
        need = {"llama3": ("factor", "low_freq_factor", "high_freq_factor",
                           "original_max_position_embeddings"), "linear": ("factor",)}.get(rope_type, ())
        for k in need:
            if k not in scaling:
                raise ModelInputError(f"{source}: rope_scaling of type {rope_type!r} needs {k!r}")
        scaling = dict(scaling)
        scaling["rope_type"] = rope_type
        scaling.pop("type", None)
        scaling = tuple(sorted((k, v) for k, v in scaling.items() if not isinstance(v, (list, dict))))
    else:
        scaling = None
    eos = raw.get("eos_token_id")
    eos = tuple(int(e) for e in (eos if isinstance(eos, list) else [eos] if eos is not None else []))
    bos = raw.get("bos_token_id")
    return LlamaConfig(
        vocab_size=_require(raw, "vocab_size", source),
        hidden_size=hidden,
        intermediate_size=_require(raw, "intermediate_size", source),
        num_hidden_layers=_require(raw, "num_hidden_layers", source),
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
        rope_theta=float(raw.get("rope_theta", 10000.0)),
        rope_scaling=scaling,
        tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
        max_position_embeddings=int(raw.get("max_position_embeddings", 2048)),
        bos_token_id=int(bos) if bos is not None else None,
        eos_token_ids=eos,
        torch_dtype=raw.get("torch_dtype"),
    )


def rope_inv_freq(config: LlamaConfig) -> np.ndarray:
    """The (head_dim/2,) inverse frequencies, with the checkpoint's rope scaling applied (float64)."""
    d = config.head_dim
    inv = 1.0 / (config.rope_theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
    scaling = config.rope_scaling_dict()
    if not scaling or scaling["rope_type"] == "default":
        return inv
    factor = float(scaling["factor"])
    if scaling["rope_type"] == "linear":
        return inv / factor
    # Llama 3: long wavelengths are slowed by `factor`, short ones kept, the band between blended.
    low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
    original = float(scaling["original_max_position_embeddings"])
    wavelen = 2 * math.pi / inv
    low_wavelen, high_wavelen = original / low, original / high
    blend = (original / wavelen - low) / (high - low)
    blended = (1 - blend) * inv / factor + blend * inv
    out = np.where(wavelen > low_wavelen, inv / factor, inv)
    middle = (wavelen <= low_wavelen) & (wavelen >= high_wavelen)
    return np.where(middle, blended, out)
