import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=12, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", max_examples=30, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Most tests check values, not speed: a short search per compile keeps the suite fast (the search
# itself, and every genome's correctness, are tested in test_optimizer.py and test_search.py).
os.environ.setdefault("LUMINAL_SEARCH_LIMIT", "4")
# JAX (a DLPack peer in test_dlpack.py) would take 75% of the GPU per process at import; with
# several pytest workers on one GPU the others then run out of memory.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# Search results go to a throwaway cache, never the user's (tests of the cache pass their own).
if "LUMINAL_CACHE_DIR" not in os.environ:
    import atexit
    import shutil
    import tempfile

    os.environ["LUMINAL_CACHE_DIR"] = tempfile.mkdtemp(prefix="luminal-test-cache-")
    # removed when this process ends (each xdist worker makes and removes its own)
    atexit.register(shutil.rmtree, os.environ["LUMINAL_CACHE_DIR"], ignore_errors=True)


def _has_gpu() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


HAS_GPU = _has_gpu()


def pytest_collection_modifyitems(config, items):
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="no NVIDIA GPU visible to CuPy on this machine (GPU tests run on the device machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
