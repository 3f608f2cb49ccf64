"""The environment switches of the CUDA backend's plan passes and launch modes (kept for A/B runs
on the device), on/off or a count: one reader each, so every switch takes the same spellings,
and a typo is an error naming the switch rather than silently the default."""
from __future__ import annotations

import os

ON = ("1", "on", "true", "yes")
OFF = ("0", "off", "false", "no")


def switch_on(name: str, default: bool, means: str) -> bool:
    """Whether the switch ``name`` is on (unset or empty: ``default``); ``means`` says what 1 does,
    for the error."""
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return default
    if value in ON:
        return True
    if value in OFF:
        return False
    raise ValueError(f"{name}={value!r}: expected 1 ({means}) or 0")


def switch_count(name: str, default: int, means: str, low: int = 0, high: int | None = None) -> int:
    """The integer in the switch ``name`` (unset or empty: ``default``), between ``low`` and
    ``high``; ``means`` says what the number is, for the error (e.g. "threads", "the blocks an
    SM of the bag's grid, such as 8")."""
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    if not value.isdigit() or int(value) < low or (high is not None and int(value) > high):
        bounds = f"{low} to {high}" if high is not None else f"at least {low}"
        raise ValueError(f"{name}={value!r}: expected {means} ({bounds})")
    return int(value)


__all__ = ["switch_count", "switch_on"]
