"""How much host memory a search candidate may use by default: running out of host memory is no
error a candidate can be dropped for, but the OOM killer ending the process (a DLRM whose
broadcast-matmul candidates wanted 20 GB on a 24 GB machine), so backends whose memory is the
host's (NumPy; MLX, whose Apple GPUs share it) budget a share of what is available."""
from __future__ import annotations

import os

HOST_MEMORY_SHARE = 0.6  # of the memory available, the default budget of one search candidate


def available_host_memory() -> int | None:
    """Bytes of host memory available now (Linux's MemAvailable, else the free physical pages),
    or None where neither is known."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def host_memory_budget(limit: int | None = None) -> int | None:
    """``HOST_MEMORY_SHARE`` of the memory available (and of ``limit``, a device's own bound,
    where smaller); None when neither is known."""
    known = [n for n in (available_host_memory(), limit) if n]
    return int(min(known) * HOST_MEMORY_SHARE) if known else None


__all__ = ["HOST_MEMORY_SHARE", "available_host_memory", "host_memory_budget"]
