"""One shared immutable empty ``KVCacheBlocks`` (vLLM PR #24964, native in every supported release).

``enabled: true`` is vLLM's own behaviour (counted, to prove the path runs). ``enabled: false`` restores
the pre-#24964 behaviour for empty results, a fresh ``KVCacheBlocks`` of fresh empty lists from every
factory call that returns no blocks (non-empty results are the same either way), so that what the
optimisation is worth can be measured.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from strategies.framework.base import Param, ProcessContext, Role, Strategy, Upstream
from strategies.framework.patches import Patches
from strategies.framework.requirements import TESTED_VLLM, AssignedIn, Defined, Params, Snippet

_MANAGER = "v1/core/kv_cache_manager.py"


class SharedEmptyKvBlocks(Strategy):
    name = "shared_empty_kv_blocks"
    description = "Share one empty KVCacheBlocks (false: a fresh empty one per empty result, as before vLLM #24964)."
    params = (Param("enabled", "bool", True, help="true: vLLM's native sharing; false: fresh objects"),)
    roles = frozenset({Role.ENGINE_CORE})
    switchable = True
    step_switchable = True
    requires = (
        Params(_MANAGER, "KVCacheManager.create_kv_cache_blocks", names=("self", "blocks")),
        # vLLM's native sharing, which `enabled: false` replaces by fresh objects.
        Snippet(_MANAGER, "KVCacheManager.create_kv_cache_blocks", text="else self.empty_kv_cache_blocks"),
        AssignedIn(_MANAGER, "KVCacheManager.__init__", attribute="empty_kv_cache_blocks"),
        Defined(_MANAGER, "KVCacheBlocks.blocks"),
    )
    vllm_versions = TESTED_VLLM
    upstream = Upstream("", "#24964")
    paths = (
        "All paths (V1/V2 model runner, sync/async scheduling, any executor): they share EngineCore's KV-cache manager."
    )

    def __init__(self) -> None:
        super().__init__()
        self.enabled = True
        self._patches = Patches()

    def install(self) -> None:
        from vllm.v1.core import kv_cache_manager as m

        self._patches.install(
            (m.KVCacheManager, "create_kv_cache_blocks", lambda original: self._sharing(original, m.KVCacheBlocks))
        )

    def _sharing(self, original: Callable[..., Any], blocks_class: type) -> Callable[..., Any]:
        """``KVCacheManager.create_kv_cache_blocks`` that counts vLLM's shared empty result while enabled and
        returns a fresh ``blocks_class`` of fresh empty lists in its place while disabled."""

        def create_kv_cache_blocks(manager: Any, blocks: Any) -> Any:
            result = original(manager, blocks)
            if result is not manager.empty_kv_cache_blocks:
                return result  # blocks to hold: the same before and after #24964
            if self.enabled:
                self.count("shared_empty")
                return result
            # Before #24964 every empty result was a new object of new (GC-tracked) empty lists.
            self.count("fresh_empty")
            return blocks_class(tuple([] for _ in blocks))

        return create_kv_cache_blocks

    def apply(self, ctx: ProcessContext, params: dict[str, Any]) -> None:
        self.enabled = params["enabled"]

    def revert(self, ctx: ProcessContext) -> None:
        self.enabled = True
