"""``gc.freeze()`` after warm-up in every process, or upstream's freeze undone.

Upstream vLLM freezes the startup heap in EngineCore, in the GPU worker and in the API server, but not in
the CPU worker nor in an offline ``LLM`` front-end. ``enabled: true`` freezes every process once it is
ready; ``enabled: false`` suppresses upstream's freezes (and unfreezes whatever was frozen) so that the
value of the freeze itself can be measured.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from strategies.framework.base import Param, ProcessContext, Strategy, Upstream
from strategies.framework.call_sites import CallSites, NoDirectCalls
from strategies.framework.patches import Patches
from strategies.framework.requirements import TESTED_VLLM, Defined

# Direct `gc.freeze()` calls that `enabled: false` need not suppress: (file in vllm/, enclosing scope).
_HARMLESS_FREEZES = (
    ("utils/gc_utils.py", "freeze_gc_heap"),  # the helper this strategy wraps
    ("utils/gc_utils.py", "freeze_gc_for_cudagraph_capture"),  # CUDA-graph capture only, unfrozen when it ends
    ("v1/worker/gpu_model_runner.py", "GPUModelRunner._freeze_gc"),  # 0.26's form of the same context manager
    ("v1/engine/core.py", "EngineCoreProc.run_engine_core"),  # ROCm only, after the engine has shut down
    ("distributed/weight_transfer/sharded_rdt_trainer.py", "_RDTProducerServer.__init__"),  # RL trainer's actor
)


def rebind(module: ModuleType, name: str, replacement: Callable[..., Any]) -> None:
    """Set ``module.name`` to ``replacement``, and ``name`` in every imported module where it still is the original
    (``from module import name``). Modules imported later bind the replacement themselves."""
    original = getattr(module, name)
    setattr(module, name, replacement)
    for other in list(sys.modules.values()):
        namespace = getattr(other, "__dict__", None)  # not getattr(other, name): it may run a lazy __getattr__
        if isinstance(namespace, dict) and namespace.get(name) is original:
            namespace[name] = replacement


class GcFreeze(Strategy):
    name = "gc_freeze"
    description = "Freeze the GC heap after warm-up in every process (false: undo upstream's freeze)."
    params = (Param("enabled", "bool", True, help="true: freeze everywhere; false: never freeze"),)
    switchable = True
    run_level_reason = (
        "a freeze moves every object alive at that moment out of the collector's reach for good: it changes the "
        "heap every later step works on, not the step in progress, and undoing it between steps would collect the "
        "whole heap"
    )
    requires = (
        Defined("utils/gc_utils.py", "freeze_gc_heap"),
        # Proves that `rebind` reaches every caller of vLLM's freeze, wherever it moves between releases.
        CallSites("vllm.utils.gc_utils", "freeze_gc_heap"),
        NoDirectCalls("gc", "freeze", allowed=_HARMLESS_FREEZES),
    )
    vllm_versions = TESTED_VLLM
    upstream = Upstream(
        "0.23",
        "EngineCore, API server and, since 0.23, the GPU worker (#44363); not the CPU worker nor an offline LLM "
        "front-end (#48675), where `true` goes beyond vLLM",
    )
    paths = (
        "All paths: true freezes each process once it is ready; false suppresses vLLM's freeze_gc_heap at every "
        "call site (EngineCore, GPU worker, API server) and unfreezes."
    )

    def __init__(self) -> None:
        super().__init__()
        self.suppress_upstream = False
        self._was_frozen: bool | None = None
        self._patches = Patches()

    def install(self) -> None:
        from vllm.utils import gc_utils

        self._patches.install((gc_utils, "freeze_gc_heap", self._suppressible), setter=rebind)

    def _suppressible(self, original: Callable[[], None]) -> Callable[[], None]:
        """vLLM's ``freeze_gc_heap`` that does nothing (and counts it) while upstream's freezes are suppressed."""

        def freeze_gc_heap() -> None:
            if self.suppress_upstream:
                self.count("upstream_freeze_suppressed")
                return
            original()

        return freeze_gc_heap

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

    def verify(self, ctx: ProcessContext) -> str | None:
        frozen = gc.get_freeze_count() > 0
        if frozen == self.suppress_upstream:
            wanted = "unfrozen" if self.suppress_upstream else "frozen"
            return f"the GC heap is not {wanted} here any more (gc.get_freeze_count() = {gc.get_freeze_count()})"
        self.count("in_force")
        return None

    def revert(self, ctx: ProcessContext) -> None:
        self.suppress_upstream = False
        if self._was_frozen:
            gc.collect()
            gc.freeze()
        else:
            gc.unfreeze()
        self._was_frozen = None
