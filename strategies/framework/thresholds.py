"""What the strategies that set CPython's GC thresholds share: keep the process's own thresholds, set new ones,
check they are still in force, and put the originals back."""

from __future__ import annotations

import gc
from typing import Any

from strategies.framework.base import Strategy


class ThresholdStrategy(Strategy):
    """A strategy that owns the process's GC thresholds while it is applied."""

    def __init__(self) -> None:
        super().__init__()
        self._saved: tuple[int, int, int] | None = None
        self._applied: tuple[int, int, int] | None = None

    def _max_num_seqs(self, vllm_config: Any) -> int:
        """The engine's ``max_num_seqs``, which both scale with; a clear error where no config is known."""
        if vllm_config is None:
            raise RuntimeError(f"{self.name} needs the engine's max_num_seqs, but no vLLM config is known here")
        return int(vllm_config.scheduler_config.max_num_seqs)

    def _set_thresholds(self, gen0: int, gen1: int | None = None, gen2: int | None = None) -> None:
        """Set gen0 (and gen1/gen2 when given, else the process's own), keeping the originals on first use."""
        if self._saved is None:
            self._saved = gc.get_threshold()
        _, own1, own2 = self._saved
        self._applied = (gen0, gen1 or own1, gen2 or own2)
        gc.set_threshold(*self._applied)

    def _thresholds_problem(self) -> str | None:
        """Why the thresholds this strategy set are no longer in force (None while they are)."""
        if gc.get_threshold() != self._applied:
            return f"GC thresholds are {gc.get_threshold()}, not the {self._applied} it set (changed by someone else)"
        return None

    def _restore_thresholds(self) -> None:
        if self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None
        self._applied = None
