"""One shared immutable empty ``KVCacheBlocks`` (vLLM PR #24964, native in every supported release).

``enabled: true`` is vLLM's own behaviour (counted, to prove the path runs). ``enabled: false`` restores
the pre-#24964 behaviour, a fresh ``KVCacheBlocks`` of fresh lists from every factory call, so that what
the optimisation is worth can be measured.
"""

from __future__ import annotations

from typing import Any

from strategies.base import Applicability, Param, ProcessContext, Role, Strategy


class SharedEmptyKvBlocks(Strategy):
    name = "shared_empty_kv_blocks"
    description = "Share one empty KVCacheBlocks (false: a fresh object per call, as before vLLM #24964)."
    params = (Param("enabled", "bool", True, help="true: vLLM's native sharing; false: fresh objects"),)
    roles = frozenset({Role.ENGINE_CORE})
    switchable = True
    step_switchable = True

    def __init__(self) -> None:
        super().__init__()
        self.enabled = True
        self._installed = False

    def applicable(self) -> Applicability:
        try:
            from vllm.v1.core.kv_cache_manager import KVCacheManager
        except ImportError as exc:
            return Applicability(False, f"vllm.v1.core.kv_cache_manager cannot be imported: {exc}")
        if not hasattr(KVCacheManager, "create_kv_cache_blocks"):
            return Applicability(False, "this vLLM has no KVCacheManager.create_kv_cache_blocks (pre-#24964)")
        return Applicability(True)

    def install(self) -> None:
        if self._installed:
            return
        from vllm.v1.core import kv_cache_manager as m

        original = m.KVCacheManager.create_kv_cache_blocks

        def create_kv_cache_blocks(manager: Any, blocks: Any) -> Any:
            if self.enabled:
                result = original(manager, blocks)
                if result is manager.empty_kv_cache_blocks:
                    self.count("shared_empty")
                return result
            self.count("fresh_blocks")
            return m.KVCacheBlocks(tuple(list(group) for group in blocks))

        m.KVCacheManager.create_kv_cache_blocks = create_kv_cache_blocks  # type: ignore[method-assign]
        self._installed = True

    def apply(self, ctx: ProcessContext, params: dict[str, Any]) -> None:
        self.enabled = params["enabled"]

    def revert(self, ctx: ProcessContext) -> None:
        self.enabled = True
