"""Compiled CUDA kernels found one by one (backends/cuda/device.py ``kernel_modules``): a plan
compiles only the kernels no earlier plan compiled, and a second process loads a plan's kernels
from the cubins an earlier one wrote, through each kernel's reference file.

NVRTC and module loading are replaced by stand-ins that record what they were given (a "cubin"
here is the module's text), so this runs without a GPU; the plans are the backend's own. The
GPU tests (test_cuda.py and the rest) run the real compiler through the same function.
"""
import dataclasses
import os
import threading

import numpy as np
import pytest

import luminal_fn as lf
import luminal_fn.numpy as lnp
from luminal_fn.backends.cuda import KERNEL_KINDS, device
from luminal_fn.backends.cuda.executable import plan_graph
from luminal_fn.backends.cuda.source import module_source
from luminal_fn.optimize.egraph import build_egraph
from luminal_fn.optimize.extract import Extractor


class _Module:
    """A loaded module: the kernels its text defines."""

    def __init__(self, text):
        self.text = text

    def get_function(self, name):
        assert f" {name}(" in self.text, f"{name} is not in this module"
        return name


class _Toolchain:
    """Stands in for NVRTC and cuModuleLoad, counting both."""

    def __init__(self, monkeypatch, folder):
        self.compiled, self.loaded, self.threads = [], [], []
        monkeypatch.setenv("CUPY_CACHE_DIR", str(folder))
        monkeypatch.setattr(device, "_toolchain", lambda: "sm_90-nvrtc13.0")
        monkeypatch.setattr(device, "arch", lambda: "sm_90")
        monkeypatch.setattr(device, "_compile_cubin", self._compile)
        monkeypatch.setattr(device, "_load_cubin", self._load)
        self.new_process(monkeypatch)

    @staticmethod
    def new_process(monkeypatch):
        monkeypatch.setattr(device, "_MODULES", {})
        monkeypatch.setattr(device, "_KERNELS", {})
        monkeypatch.setattr(device, "_AHEAD", {})

    def _compile(self, text, arch_name):
        assert arch_name == "sm_90"
        if "lf_fail_here" in text:
            raise RuntimeError("error: identifier \"lf_fail_here\" is undefined")
        self.threads.append(threading.current_thread().name)
        self.compiled.append(text)
        return text.encode()

    def _load(self, path):
        self.loaded.append(path)
        with open(path) as f:
            return _Module(f.read())


def _kernels(fn, x):
    traced = lf.jit(fn).trace(x)
    llir = Extractor(build_egraph(traced.hlir), traced.hlir, kernel_kinds=KERNEL_KINDS).extract()
    return plan_graph(llir, {}, arch=90).kernels()


@pytest.fixture(scope="module")
def plans():
    """Two plans that share their sort (a hand kernel) and differ around it."""
    x = np.zeros((4, 64), np.float32)
    first = _kernels(lambda x: lnp.sort(lnp.exp(x), axis=-1) + 1.0, x)
    second = _kernels(lambda x: lnp.sort(lnp.exp(x), axis=-1) * 3.0, x)
    names = lambda ks: {k.name for k in ks}  # noqa: E731
    shared = names(first) & names(second)
    assert any(k.meta.get("hand") for k in first if k.name in shared), "the sort should be shared"
    assert names(second) - shared, "the second plan should have kernels of its own"
    return first, second


def _defines(text, name):
    return f" {name}(" in text


def test_a_plan_compiles_only_the_kernels_no_earlier_plan_compiled(plans, monkeypatch, tmp_path):
    first, second = plans
    tc = _Toolchain(monkeypatch, tmp_path)
    got = device.kernel_modules(first)
    assert len(tc.compiled) == 1 and tc.compiled[0] == module_source(first)
    assert {got[k.name].get_function(k.name) for k in first} == {k.name for k in first}
    got2 = device.kernel_modules(second)
    assert len(tc.compiled) == 2
    own = [k for k in second if k.name not in {f.name for f in first}]
    assert tc.compiled[1] == module_source(own)
    for k in second:  # each kernel from the module that holds it: the shared ones from the first
        assert got2[k.name].get_function(k.name) == k.name
        assert got2[k.name] is got[k.name] if k.name in got else got2[k.name] is not got[first[0].name]
    device.kernel_modules(first)
    device.kernel_modules(second)
    assert len(tc.compiled) == 2  # nothing new
    assert len(tc.loaded) == 2  # and each module loaded once, when it was compiled


def test_a_second_process_loads_the_kernels_from_the_cubins_on_disk(plans, monkeypatch, tmp_path):
    first, second = plans
    tc = _Toolchain(monkeypatch, tmp_path)
    device.kernel_modules(first)
    device.kernel_modules(second)
    assert len(tc.compiled) == 2 and len(tc.loaded) == 2
    tc.new_process(monkeypatch)
    got = device.kernel_modules(second)
    assert len(tc.compiled) == 2, "the second process compiled again"
    assert len(tc.loaded) == 4  # the two cubins that hold its kernels, each loaded once
    assert all(got[k.name].get_function(k.name) == k.name for k in second)
    # a cleared cubin: its kernels are compiled again, and found again through the new reference
    for path in set(tc.loaded):
        os.remove(path)
    tc.new_process(monkeypatch)
    device.kernel_modules(second)
    assert len(tc.compiled) == 3 and tc.compiled[2] == module_source(second)
    tc.new_process(monkeypatch)
    device.kernel_modules(second)
    assert len(tc.compiled) == 3


def test_hand_macros_and_ftz_compile_apart(plans, monkeypatch, tmp_path):
    first, _ = plans
    tc = _Toolchain(monkeypatch, tmp_path)
    device.kernel_modules(first)
    hand = [k for k in first if k.meta.get("hand")]
    plain = [k for k in first if not k.meta.get("hand")]
    # a hand macro changes the text the hand kernels compile after, not the generated kernels'
    monkeypatch.setenv("LUMINAL_CUDA_GEMV_PREFETCH", "4096")
    device.kernel_modules(first)
    assert len(tc.compiled) == 2 and "#define LF_GEMV_PREFETCH 4096" in tc.compiled[1]
    assert all(_defines(tc.compiled[1], k.name) for k in hand)
    assert not any(_defines(tc.compiled[1], k.name) for k in plain)
    monkeypatch.delenv("LUMINAL_CUDA_GEMV_PREFETCH")
    device.kernel_modules(first)
    assert len(tc.compiled) == 2
    # CuPy's flushing compile is a module of its own, never mixed with NVRTC's cubins
    compiled_by_cupy = []
    monkeypatch.setattr(device, "_compile_through_cupy", lambda text: compiled_by_cupy.append(text) or _Module(text))
    monkeypatch.setenv("LUMINAL_CUDA_FTZ", "1")
    got = device.kernel_modules(first)
    assert compiled_by_cupy == [module_source(first)] and len(tc.compiled) == 2
    assert all(isinstance(got[k.name], _Module) and got[k.name].text == compiled_by_cupy[0] for k in first)


def test_a_traced_plan_is_one_module(plans, monkeypatch, tmp_path):
    first, second = plans
    tc = _Toolchain(monkeypatch, tmp_path)
    device.kernel_modules(first)
    monkeypatch.setenv("LUMINAL_CUDA_TRACE", "1024")
    got = device.kernel_modules(second)
    assert len(tc.compiled) == 2 and tc.compiled[1] == module_source(second)
    assert tc.compiled[1].startswith("#define LF_TRACE 1024")
    assert len({id(m) for m in got.values()}) == 1


def test_the_include_dir_nvrtc_needed_once_is_given_from_then_on(monkeypatch):
    """Where NVRTC does not find cuda_fp16.h by itself, the first compile fails and is retried
    with a CUDA include dir; later compiles pass that dir at once instead of failing first."""
    monkeypatch.setattr(device, "_WORKING_OPTIONS", None)
    monkeypatch.setattr(device, "_header_dirs", lambda: ["/usr/local/cuda/include"])
    calls = []

    def compile_with(options):
        calls.append(options)
        if not any(o.startswith("-I") for o in options):
            raise RuntimeError("catastrophic error: cannot open source file \"cuda_fp16.h\"")
        return "cubin"

    assert device._compile_finding_headers(compile_with) == "cubin"
    assert device._compile_finding_headers(compile_with) == "cubin"
    assert calls == [device.OPTIONS] + [device.OPTIONS + ("-I/usr/local/cuda/include",)] * 2
    # a compile error of the module itself is raised as it is, with the options that work
    def broken(options):
        raise RuntimeError("error: identifier \"lf_nothing\" is undefined")
    with pytest.raises(RuntimeError, match="lf_nothing"):
        device._compile_finding_headers(broken)


def test_plans_compiled_ahead_on_worker_threads(plans, monkeypatch, tmp_path):
    """compile_ahead (a search's prepared candidates) compiles what kernel_modules would, on a
    worker thread; kernel_modules then takes those modules instead of compiling."""
    first, second = plans
    tc = _Toolchain(monkeypatch, tmp_path)
    before = device.compile_counts()
    device.compile_ahead(first)
    device.compile_ahead(second)  # (only its own kernels: the shared ones are on their way)
    device.compile_ahead(first)  # (nothing new)
    got1 = device.kernel_modules(first)
    got2 = device.kernel_modules(second)
    own = [k for k in second if k.name not in {f.name for f in first}]
    assert tc.compiled == [module_source(first), module_source(own)]
    assert all(t.startswith("luminal_fn-nvrtc") for t in tc.threads)
    counts = {k: v - before[k] for k, v in device.compile_counts().items()}
    n_own = len({k.name for k in own})
    assert counts["modules"] == counts["ahead_modules"] == 2
    assert counts["kernels"] == len({k.name for k in first}) + n_own
    assert counts["nvrtc_s"] >= 0 and counts["waited_s"] >= 0
    assert all(got2[k.name] is got1[k.name] for k in first if k.name in got2)
    assert all(got2[k.name].get_function(k.name) == k.name for k in second)
    device.compile_ahead(second)  # loaded now: nothing to compile
    assert len(tc.compiled) == 2 and not device._AHEAD
    tc.new_process(monkeypatch)  # and the references were written for a second process
    device.kernel_modules(second)
    assert len(tc.compiled) == 2


def test_a_failed_compile_ahead_is_reported_with_its_source(plans, monkeypatch, tmp_path):
    first, _ = plans
    tc = _Toolchain(monkeypatch, tmp_path)
    broken = [dataclasses.replace(k, text=k.text + "\n// lf_fail_here") for k in first]
    device.compile_ahead(broken)
    with pytest.raises(RuntimeError, match=r"source saved to .*lf_fail_here"):
        device.kernel_modules(broken)
    assert tc.compiled == []
    monkeypatch.setenv("LUMINAL_CUDA_TRACE", "1024")  # a traced plan is one module, compiled when run
    device.compile_ahead(first)
    assert not device._AHEAD


def test_compile_threads_switch(plans, monkeypatch, tmp_path):
    first, _ = plans
    tc = _Toolchain(monkeypatch, tmp_path)
    monkeypatch.setenv("LUMINAL_CUDA_COMPILE_THREADS", "0")  # no threads: compiled when it runs
    device.compile_ahead(first)
    assert not device._AHEAD and tc.compiled == []
    before = device.compile_counts()
    device.kernel_modules(first)
    assert tc.threads == [threading.current_thread().name]
    after = device.compile_counts()
    assert after["modules"] - before["modules"] == 1 and after["ahead_modules"] == before["ahead_modules"]
    assert after["kernels"] - before["kernels"] == len({k.name for k in first})
    monkeypatch.setenv("LUMINAL_CUDA_COMPILE_THREADS", "two")
    for call in (device.compile_ahead, device.kernel_modules):  # (a search's prepare hides errors)
        with pytest.raises(ValueError, match="LUMINAL_CUDA_COMPILE_THREADS='two'"):
            call(first)


def test_a_forked_child_does_not_wait_for_its_parents_compiles(plans, monkeypatch, tmp_path):
    import concurrent.futures

    first, _ = plans
    tc = _Toolchain(monkeypatch, tmp_path)
    stuck = concurrent.futures.Future()  # a parent's job that no thread of the child will finish
    for key in device.kernel_keys(first).values():
        device._ahead()[key] = (stuck, "parent-module")
    monkeypatch.setattr(device.os, "getpid", lambda: -1)  # (what a child sees after fork)
    done = []
    child = threading.Thread(target=lambda: done.append(device.kernel_modules(first)), daemon=True)
    child.start()
    child.join(timeout=30)
    assert done, "kernel_modules waited for a compile of the parent process"
    assert len(tc.compiled) == 1 and all(done[0][k.name].get_function(k.name) == k.name for k in first)
