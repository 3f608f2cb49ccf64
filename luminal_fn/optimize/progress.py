"""Progress bars (tqdm, on stderr) for the e-graph build steps and for the candidates the search
times, with the best time so far. Quiet unless stderr is a terminal, or as SearchOptions.progress
(or $LUMINAL_PROGRESS=0/1) says."""
from __future__ import annotations

import os
import sys

ENV_VAR = "LUMINAL_PROGRESS"


def progress_enabled(setting=None, stream=None) -> bool:
    """Whether to draw: `setting` (True/False, or a SearchOptions) wins; None means
    $LUMINAL_PROGRESS if set, else whether `stream` (default stderr) is a terminal."""
    setting = getattr(setting, "progress", setting)
    if setting is not None:
        return bool(setting)
    env = os.environ.get(ENV_VAR, "").strip().lower()
    if env:
        return env not in ("0", "false", "no", "off")
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def format_seconds(t: float | None) -> str:
    if t is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if t >= scale:
            return f"{t / scale:.3g} {unit}"
    return f"{t / 1e-9:.3g} ns"


class ProgressBar:
    """A tqdm bar when enabled, else a no-op with the same methods."""

    def __init__(self, total: int | None, desc: str, enabled: bool, unit: str = "step",
                 leave: bool = False, stream=None):
        self.enabled = enabled
        self.n = 0
        self._bar = None
        if enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, unit=unit, leave=leave,
                             file=sys.stderr if stream is None else stream, dynamic_ncols=True)

    def step(self, label: str | None = None, n: int = 1) -> None:
        """Advance by `n`; `label` names what is running now."""
        self.n += n
        if self._bar is not None:
            if label is not None:
                self._bar.set_postfix_str(label, refresh=False)
            self._bar.update(n)

    def set_status(self, text: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(text)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


class SearchProgress(ProgressBar):
    """A bar over the candidates of one search; pass it as `genetic_search(..., report=bar)`."""

    def __init__(self, limit: int, desc: str = "search", enabled: bool = False, stream=None):
        super().__init__(limit, desc, enabled, unit="cand", leave=True, stream=stream)
        self.best_time = None
        self.failed = 0

    def __call__(self, candidate, n_timed: int, best_time) -> None:
        self.best_time = best_time
        if not candidate.ok:
            self.failed += 1
        self.n = n_timed
        if self._bar is not None:
            status = f"best {format_seconds(best_time)}"
            if self.failed:
                status += f", {self.failed} dropped"
            self._bar.set_postfix_str(status, refresh=False)
            self._bar.update(n_timed - self._bar.n)


def build_progress(steps: int | None, setting=None, desc: str = "e-graph") -> ProgressBar:
    """A bar over the e-graph build steps (load, each rule set, read-back...)."""
    return ProgressBar(steps, desc, progress_enabled(setting), unit="step")


def search_progress(limit: int, setting=None, desc: str = "search") -> SearchProgress:
    """A bar over one bucket's candidates; `setting` is a SearchOptions or True/False/None."""
    return SearchProgress(limit, desc, progress_enabled(setting))
