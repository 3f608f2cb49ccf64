"""Llama weights: the tensor names Hugging Face uses, a memory-mapped safetensors reader (single file
or sharded index), and loading into backend arrays once (bf16 kept as bf16 when asked).

The model function takes the weights as a pytree::

    {"embed": (vocab, hidden), "norm": (hidden,), "lm_head": (vocab, hidden) or absent when tied,
     "layers": [{"attn_norm", "q", "k", "v", "o", "mlp_norm", "gate", "up", "down"}, ...]}

with every matrix in Hugging Face's (out_features, in_features) layout.
"""
from __future__ import annotations

import json
import os
import struct
import sys
import time

import numpy as np

from .config import LlamaConfig, ModelInputError

try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes is a dependency of luminal_fn
    ml_dtypes, BF16 = None, None

# safetensors dtype names -> NumPy dtypes this example can load (F64 is narrowed to float32)
_ST_DTYPES = {"F32": np.dtype(np.float32), "F16": np.dtype(np.float16), "F64": np.dtype(np.float64)}
if BF16 is not None:
    _ST_DTYPES["BF16"] = BF16

LOAD_DTYPES = ("float32", "bfloat16")

_LAYER_TENSORS = {
    "attn_norm": "input_layernorm.weight",
    "q": "self_attn.q_proj.weight",
    "k": "self_attn.k_proj.weight",
    "v": "self_attn.v_proj.weight",
    "o": "self_attn.o_proj.weight",
    "mlp_norm": "post_attention_layernorm.weight",
    "gate": "mlp.gate_proj.weight",
    "up": "mlp.up_proj.weight",
    "down": "mlp.down_proj.weight",
}


def expected_tensors(config: LlamaConfig) -> dict:
    """Hugging Face tensor name -> (pytree path, shape) for every weight the model reads."""
    h, i = config.hidden_size, config.intermediate_size
    shapes = {"attn_norm": (h,), "q": (config.q_dim, h), "k": (config.kv_dim, h),
              "v": (config.kv_dim, h), "o": (h, config.q_dim), "mlp_norm": (h,), "gate": (i, h),
              "up": (i, h), "down": (h, i)}
    out = {"model.embed_tokens.weight": (("embed",), (config.vocab_size, h)),
           "model.norm.weight": (("norm",), (h,))}
    if not config.tie_word_embeddings:
        out["lm_head.weight"] = (("lm_head",), (config.vocab_size, h))
    for layer in range(config.num_hidden_layers):
        for key, suffix in _LAYER_TENSORS.items():
            out[f"model.layers.{layer}.{suffix}"] = (("layers", layer, key), shapes[key])
    return out


def weight_bytes(config: LlamaConfig, dtype: str) -> int:
    """Bytes of the loaded weight tree: matrices in ``dtype``, norm vectors in float32."""
    wide = 4 if dtype == "float32" else 2
    return sum(int(np.prod(shape)) * (4 if len(shape) == 1 else wide)
               for _, shape in expected_tensors(config).values())


# ---- the safetensors format, memory-mapped -----------------------------------------------------
class SafetensorsFile:
    """One .safetensors file: its JSON header parsed, tensors returned as np.memmap views."""

    def __init__(self, path: str):
        self.path = path
        try:
            with open(path, "rb") as f:
                head = f.read(8)
                if len(head) < 8:
                    raise ValueError("file shorter than the 8-byte header length")
                (n,) = struct.unpack("<Q", head)
                if n > 100 * 2**20:
                    raise ValueError(f"header length {n} is implausible")
                header = json.loads(f.read(n))
        except (OSError, ValueError) as e:
            raise ModelInputError(f"{path} is not a readable safetensors file ({e}); re-download it") from None
        self.metadata = header.pop("__metadata__", None) or {}
        self.header = header
        self.data_offset = 8 + n
        self.size = os.path.getsize(path)
        self._mm = None

    def names(self):
        return self.header.keys()

    def info(self, name: str) -> tuple:
        """(safetensors dtype name, shape)."""
        e = self.header[name]
        return e["dtype"], tuple(e["shape"])

    def tensor(self, name: str) -> np.ndarray:
        dtype_name, shape = self.info(name)
        npd = _ST_DTYPES.get(dtype_name)
        if npd is None:
            raise ModelInputError(f"{self.path}: tensor {name} has dtype {dtype_name}, which this "
                                  "example cannot load")
        begin, end = self.header[name]["data_offsets"]
        if self.data_offset + end > self.size:
            raise ModelInputError(f"{self.path} is truncated (tensor {name} ends past the end of the "
                                  "file); the download is incomplete, fetch the file again")
        if self._mm is None:
            self._mm = np.memmap(self.path, dtype=np.uint8, mode="r")
        raw = self._mm[self.data_offset + begin:self.data_offset + end]
        return raw.view(npd).reshape(shape)


class Checkpoint:
    """All the safetensors files of a model folder, by tensor name."""

    def __init__(self, model_dir: str):
        index = os.path.join(model_dir, "model.safetensors.index.json")
        single = os.path.join(model_dir, "model.safetensors")
        if os.path.isfile(index):
            try:
                with open(index, encoding="utf-8") as f:
                    weight_map = json.load(f)["weight_map"]
            except (OSError, ValueError, KeyError) as e:
                raise ModelInputError(f"cannot read {index} ({e}); re-download the checkpoint") from None
            files = sorted(set(weight_map.values()))
            missing = [p for p in files if not os.path.isfile(os.path.join(model_dir, p))]
            if missing:
                raise ModelInputError(
                    f"{model_dir!r} is incomplete: the index names {len(files)} shard(s) but "
                    f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing; download "
                    "every model-*.safetensors file")
            self.files = {p: SafetensorsFile(os.path.join(model_dir, p)) for p in files}
            self.where = {name: self.files[p] for name, p in weight_map.items()}
        elif os.path.isfile(single):
            f = SafetensorsFile(single)
            self.files = {"model.safetensors": f}
            self.where = {name: f for name in f.names()}
        else:
            found = sorted(p for p in os.listdir(model_dir) if p.endswith(".safetensors"))
            hint = (f" (found {', '.join(found)} but no model.safetensors.index.json)" if found
                    else " (.bin / .pth checkpoints are not read; use the safetensors files)")
            raise ModelInputError(
                f"{model_dir!r} has neither model.safetensors nor model.safetensors.index.json{hint}")

    @property
    def nbytes(self) -> int:
        return sum(f.size for f in self.files.values())

    def check(self, config: LlamaConfig, dtype: str) -> dict:
        """Every expected tensor present, with its shape and a loadable dtype; returns the
        checkpoint's dtype names by count. Reads only headers (fast), so it runs before loading."""
        if dtype not in LOAD_DTYPES:
            raise ModelInputError(f"--dtype {dtype!r} is not supported; use one of {', '.join(LOAD_DTYPES)}")
        if dtype == "bfloat16" and BF16 is None:
            raise ModelInputError("--dtype bfloat16 needs the ml_dtypes package (pip install ml_dtypes)")
        found: dict = {}
        missing = []
        for name, (_, shape) in expected_tensors(config).items():
            f = self.where.get(name)
            if f is None or name not in f.header:
                missing.append(name)
                continue
            st_dtype, have = f.info(name)
            if have != shape:
                raise ModelInputError(
                    f"tensor {name} has shape {have} in {f.path} but config.json implies {shape}; the "
                    "checkpoint and its config.json do not match")
            if st_dtype not in _ST_DTYPES:
                raise ModelInputError(
                    f"tensor {name} is stored as {st_dtype}, which cannot be loaded as {dtype}; this "
                    "example reads unquantized F32/F16/BF16 checkpoints (quantized or integer weights "
                    "need a different checkpoint)")
            if f.data_offset + f.header[name]["data_offsets"][1] > f.size:
                raise ModelInputError(
                    f"{f.path} is truncated (tensor {name} ends past the end of the file); the "
                    "download is incomplete, fetch the file again")
            found[st_dtype] = found.get(st_dtype, 0) + 1
        if missing:
            shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
            raise ModelInputError(f"the checkpoint lacks {len(missing)} tensor(s) the config needs: {shown}")
        return found


def _set_path(tree: dict, path: tuple, value):
    node = tree
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value


def empty_tree(config: LlamaConfig) -> dict:
    return {"layers": [{} for _ in range(config.num_hidden_layers)]}


def convert(arr: np.ndarray, dtype: str) -> np.ndarray:
    """float32 or bfloat16 storage; matrices stay memory-mapped when no conversion is needed."""
    target = np.dtype(np.float32) if dtype == "float32" else BF16
    if arr.dtype == target:
        return arr
    return arr.astype(target)


def load_weights(model_dir: str, config: LlamaConfig, dtype: str = "float32", backend=None,
                 checkpoint: Checkpoint | None = None, progress: bool | None = None) -> dict:
    """The weight pytree, each tensor placed on the backend once with ``lf.device_put``.
    Norm weights are kept in float32 (they are tiny and RMS norm runs in float32)."""
    import luminal_fn as lf

    ckpt = checkpoint or Checkpoint(model_dir)
    ckpt.check(config, dtype)
    wanted = expected_tensors(config)
    tree = empty_tree(config)
    bar = _progress(ckpt.nbytes, progress)
    for name, (path, _) in wanted.items():
        arr = ckpt.where[name].tensor(name)
        store = "float32" if len(arr.shape) == 1 else dtype
        _set_path(tree, path, lf.device_put(convert(arr, store), backend))
        if bar is not None:
            bar.update(arr.nbytes)
    if bar is not None:
        bar.close()
    return tree


def _progress(total_bytes: int, progress: bool | None):
    if progress is None:
        progress = total_bytes > 256 * 2**20 and sys.stderr.isatty()
    if not progress:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total_bytes, unit="B", unit_scale=True, desc="weights", file=sys.stderr)


def random_weights(config: LlamaConfig, dtype: str = "float32", seed: int = 0, backend=None,
                   as_numpy: bool = False, embed_std: float = 0.02) -> dict:
    """Random weights of the config's shape, built in memory (for speed runs without a download).
    Scaled like an initialised Llama (embedding std ``embed_std``, matrices 1/sqrt(fan in), norms
    near 1) so activations stay finite."""
    if dtype not in LOAD_DTYPES:
        raise ModelInputError(f"dtype {dtype!r} is not supported; use one of {', '.join(LOAD_DTYPES)}")
    rng = np.random.default_rng(seed)
    tree = empty_tree(config)
    for name, (path, shape) in expected_tensors(config).items():
        if len(shape) == 1:
            arr = (1.0 + 0.1 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
            store = "float32"
        else:
            # uniform with the wanted std: twice as fast to draw as normal (1.2B values for 1B)
            std = embed_std if "embed" in name or "lm_head" in name else 1.0 / np.sqrt(shape[1])
            arr = rng.random(shape, dtype=np.float32)
            arr -= np.float32(0.5)
            arr *= np.float32(2 * np.sqrt(3.0) * std)
            store = dtype
        arr = convert(arr, store)
        if not as_numpy:
            import luminal_fn as lf

            arr = lf.device_put(arr, backend)
        _set_path(tree, path, arr)
    return tree


def write_safetensors(config: LlamaConfig, weights: dict, path: str) -> None:
    """Write a NumPy weight tree with Hugging Face tensor names (through the safetensors library)."""
    from safetensors.numpy import save_file

    flat = {}
    for name, (tree_path, _) in expected_tensors(config).items():
        node = weights
        for k in tree_path:
            node = node[k]
        flat[name] = np.ascontiguousarray(node)
    save_file(flat, path, metadata={"format": "pt"})


class Timer:
    """``with Timer() as t: ...`` then ``t.s`` seconds."""

    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.s = time.perf_counter() - self.t0
