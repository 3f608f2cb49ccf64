"""NVRTC seconds of a CUDA search's candidates, on any machine with NVRTC (no GPU or CuPy needed:
NVRTC compiles on the host). The genetic search itself runs over the CUDA backend's extraction of
a Llama-1B-width bf16 step (s = 32, c = 512); each candidate is planned (``plan_graph``) as the
backend plans it and compiles the kernels no earlier plan compiled, in one module (as
``device.kernel_modules`` does). The search's "time" is a stand-in (the plan's launches), so it
explores as a real search does without a device.

    pip install nvidia-cuda-nvrtc   # or point --nvrtc at a libnvrtc.so
    python benchmarks/search_nvrtc.py [--layers 2] [--candidates 30] [--tokens 32] [--nvrtc PATH] [--include DIR]
"""
from __future__ import annotations

import argparse
import ctypes
import dataclasses
import glob
import os
import site
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, ROOT)


def find_nvrtc() -> str | None:
    for sp in sys.path + site.getsitepackages() + [site.getusersitepackages()]:
        hits = sorted(glob.glob(os.path.join(sp, "nvidia", "*", "lib", "libnvrtc.so*")))
        hits = [h for h in hits if "builtins" not in h]
        if hits:
            return hits[0]
    return None


class Nvrtc:
    def __init__(self, path: str, include: str | None):
        self.lib = ctypes.CDLL(path)
        self.options = [b"-std=c++17", b"-arch=sm_90"] + ([f"-I{include}".encode()] if include else [])

    def seconds(self, text: str) -> float:
        prog = ctypes.c_void_p()
        if self.lib.nvrtcCreateProgram(ctypes.byref(prog), text.encode(), b"module.cu", 0, None, None):
            raise RuntimeError("nvrtcCreateProgram failed")
        opts = (ctypes.c_char_p * len(self.options))(*self.options)
        t0 = time.perf_counter()
        status = self.lib.nvrtcCompileProgram(prog, len(self.options), opts)
        seconds = time.perf_counter() - t0
        if status:
            n = ctypes.c_size_t()
            self.lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
            log = ctypes.create_string_buffer(n.value)
            self.lib.nvrtcGetProgramLog(prog, log)
            raise RuntimeError(f"NVRTC failed (give --include a CUDA include dir?):\n{log.value.decode()[-2000:]}")
        self.lib.nvrtcDestroyProgram(ctypes.byref(prog))
        return seconds


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--candidates", type=int, default=30)
    ap.add_argument("--tokens", type=int, default=32, help="the step's s (1: a decode step)")
    ap.add_argument("--nvrtc", default=None, help="libnvrtc.so (default: the nvidia-cuda-nvrtc wheel's)")
    ap.add_argument("--include", default=None, help="a CUDA include dir holding cuda_fp16.h, where NVRTC "
                    "does not find it by itself (such as /usr/local/cuda/include)")
    args = ap.parse_args()
    path = args.nvrtc or find_nvrtc()
    if path is None:
        sys.exit("no libnvrtc found: pip install nvidia-cuda-nvrtc, or give --nvrtc")
    nvrtc = Nvrtc(path, args.include)

    from llama import model
    from llama.checkpoint import random_weights
    from llama.config import llama_3_2_1b_config

    from luminal_fn.backends.cuda import KERNEL_KINDS
    from luminal_fn.backends.cuda.executable import plan_graph
    from luminal_fn.backends.cuda.source import distinct, kernel_keys, module_source
    from luminal_fn.optimize.egraph import build_egraph
    from luminal_fn.optimize.extract import Extractor
    from luminal_fn.optimize.options import SearchOptions
    from luminal_fn.optimize.search import genetic_search

    cfg = dataclasses.replace(llama_3_2_1b_config(), num_hidden_layers=args.layers)
    step = model.make_step(cfg, backend="numpy", output="greedy")
    traced = step.trace(random_weights(cfg, "bfloat16", backend="numpy"),
                        *model.step_inputs(np.arange(32, dtype=np.int32), 0), model.new_cache(cfg, 512, backend="numpy"))
    ex = Extractor(build_egraph(traced.hlir), traced.hlir, kernel_kinds=KERNEL_KINDS)
    dims = {"s": args.tokens, "c": 512}
    compiled: set = set()
    totals = [0, 0, 0.0]  # modules, kernels, NVRTC seconds

    def evaluate(genome):
        kernels = plan_graph(ex.extract(genome), dims, arch=90).kernels()
        keys = kernel_keys(kernels)
        new = [k for name, k in distinct(kernels).items() if keys[name] not in compiled]
        if new:
            compiled.update(keys[k.name] for k in new)
            totals[0] += 1
            totals[1] += len(new)
            totals[2] += nvrtc.seconds(module_source(new))
        return 1e-6 * (1 + len(kernels) / 1e4)

    genetic_search(ex.space(), evaluate, SearchOptions(limit=args.candidates, seed=0),
                   initial=[ex.generic_genome(), (0,) * len(ex.genes), *ex.kernel_genomes()])
    print(f"| {args.candidates} candidates, {args.layers} layers, s = {args.tokens} ({os.path.basename(path)}) "
          "| modules compiled | kernels | NVRTC s |")
    print("| --- | --- | --- | --- |")
    print(f"| the candidates' new kernels | {totals[0]} | {totals[1]} | {totals[2]:.1f} |")


if __name__ == "__main__":
    main()
