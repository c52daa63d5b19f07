"""``gc.freeze()`` after warm-up in every process, or upstream's freeze undone.

Upstream vLLM freezes the startup heap in EngineCore, in the GPU worker and in the API server, but not in
the CPU worker nor in an offline ``LLM`` front-end. ``enabled: true`` freezes every process once it is
ready; ``enabled: false`` suppresses upstream's freezes (and unfreezes whatever was frozen) so that the
value of the freeze itself can be measured.
"""

from __future__ import annotations

import gc
import importlib
from typing import Any

from strategies.base import Param, ProcessContext, Strategy

# Modules that bind vLLM's freeze helper by name (`from vllm.utils.gc_utils import freeze_gc_heap`).
_CALL_SITES = (
    "vllm.v1.engine.core",
    "vllm.v1.worker.gpu_worker",
    "vllm.entrypoints.launchers.utils.server_utils",
    "vllm.entrypoints.openai.api_server",
)


class GcFreeze(Strategy):
    name = "gc_freeze"
    description = "Freeze the GC heap after warm-up in every process (false: undo upstream's freeze)."
    params = (Param("enabled", "bool", True, help="true: freeze everywhere; false: never freeze"),)
    switchable = True

    def __init__(self) -> None:
        super().__init__()
        self.suppress_upstream = False
        self._was_frozen: bool | None = None

    def install(self) -> None:
        from vllm.utils import gc_utils

        original = gc_utils.freeze_gc_heap

        def freeze_gc_heap() -> None:
            if self.suppress_upstream:
                self.count("upstream_freeze_suppressed")
                return
            original()

        for name in _CALL_SITES:
            try:
                module = importlib.import_module(name)
            except Exception:  # a call site that does not exist in this vLLM (or cannot import here)
                continue
            if getattr(module, "freeze_gc_heap", None) is original:
                module.freeze_gc_heap = freeze_gc_heap  # type: ignore[attr-defined]

    def apply(self, ctx: ProcessContext, params: dict[str, Any]) -> None:
        if self._was_frozen is None:
            self._was_frozen = gc.get_freeze_count() > 0
        if params["enabled"]:
            self.suppress_upstream = False
            gc.collect()
            gc.freeze()
            self.count("freeze")
        else:
            self.suppress_upstream = True
            gc.unfreeze()
            self.count("unfreeze")

    def revert(self, ctx: ProcessContext) -> None:
        self.suppress_upstream = False
        if self._was_frozen:
            gc.collect()
            gc.freeze()
        else:
            gc.unfreeze()
        self._was_frozen = None
