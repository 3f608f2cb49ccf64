"""Assembling one CUDA module from a plan's kernels, and checking it with nvcc where present.

The kernels a plan compiles go into one module (one NVRTC compile instead of one per kernel:
a cold compile costs 80-100 ms). The text is the CUDA prelude, the hand kernel sources when a
hand kernel is used, then each distinct kernel once. A kernel's key (``kernel_keys``) is its
text and that prefix, so a kernel compiled into one plan's module serves every later plan
(device.kernel_modules). Nothing here needs CuPy or a GPU.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile

from ..render import CUDA
from ..render.files import kernel_file
from .switches import switch_count

TRACE_SWITCH = "LUMINAL_CUDA_TRACE"
HAND_ORDER = ("rms_norm.cu", "softmax.cu", "rope.cu", "gemv.cu", "attention.cu", "attention_tiles.cu",
              "argmax.cu", "sort.cu", "scan.cu")
# compile-time settings of the hand kernels that sweeps on the device set: (switch, the macro it
# defines, which values it takes, what to give): the bytes of each weight row a GEMV asks L2 for
# before its wait, and which folded GEMVs load their first rows before the prologue (gemv.cu)
HAND_MACRO_SWITCHES = (
    ("LUMINAL_CUDA_GEMV_PREFETCH", "LF_GEMV_PREFETCH", str.isdigit, "a byte count, such as 4096"),
    ("LUMINAL_CUDA_GEMV_EARLY", "LF_GEMV_EARLY", lambda v: v in ("0", "1", "2", "3"),
     "0 (none), 1 (single and merged GEMVs), 2 (the gate/up pair) or 3 (both)"),
)


def module_source(kernels) -> str:
    """The text of one module holding every distinct kernel in ``kernels`` (KernelSource)."""
    seen = distinct(kernels)
    texts = [k.text for k in seen.values()]
    return "\n".join([module_prefix(any(k.meta.get("hand") for k in seen.values()))] + texts) + "\n"


def distinct(kernels) -> dict:
    """name -> kernel, each distinct kernel once (a name is a digest of the kernel's text)."""
    seen: dict = {}
    for k in kernels:
        seen.setdefault(k.name, k)
    return seen


def module_prefix(hand: bool) -> str:
    """What a module holds before its kernels: the trace records' size when tracing, the prelude,
    and where a hand kernel is among them, the hand macros and files."""
    parts = [CUDA.prelude]
    trace = switch_count(TRACE_SWITCH, 0, "the number of block records to keep, such as 65536", 1)
    if trace:  # block timing (benchmarks/kernel_trace.py): the records the module holds
        parts.insert(0, f"#define LF_TRACE {trace}")
    if hand:
        parts += hand_macros()
        parts += [kernel_file(f) for f in HAND_ORDER]
    return "\n".join(parts)


def kernel_keys(kernels) -> dict:
    """name -> a key of what compiling that kernel depends on: its text and the module prefix it
    is compiled after (the hand macros and files for a hand kernel)."""
    prefix = {}
    keys = {}
    for name, k in distinct(kernels).items():
        hand = bool(k.meta.get("hand"))
        if hand not in prefix:
            prefix[hand] = source_key(module_prefix(hand))
        keys[name] = source_key(k.text, prefix[hand])
    return keys


def hand_macros() -> list:
    """The ``#define`` lines the HAND_MACRO_SWITCHES set in the environment ask for (checked)."""
    lines = []
    for switch, macro, valid, want in HAND_MACRO_SWITCHES:
        value = os.environ.get(switch, "")
        if value:
            if not valid(value):
                raise ValueError(f"{switch}={value!r}: give {want}")
            lines.append(f"#define {macro} {int(value)}")
    return lines


def source_key(text: str, arch: str = "") -> str:
    return hashlib.sha256((arch + "\0" + text).encode()).hexdigest()[:32]


def nvcc_available() -> bool:
    return shutil.which("nvcc") is not None


def nvcc_check(text: str, arch: str = "sm_90") -> str:
    """Compile ``text`` to PTX with nvcc (a syntax and type check on machines without a GPU);
    returns nvcc's diagnostics, raises RuntimeError with them when compilation fails."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "module.cu")
        with open(src, "w") as f:
            f.write(text)
        proc = subprocess.run(["nvcc", f"-arch={arch}", "--ptx", "-std=c++17", "-o",
                               os.path.join(d, "module.ptx"), src],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"nvcc failed on a rendered module:\n{proc.stderr[-4000:]}")
        return proc.stderr


__all__ = ["distinct", "hand_macros", "kernel_keys", "module_prefix", "module_source", "source_key",
           "nvcc_available", "nvcc_check"]
