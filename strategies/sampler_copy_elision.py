"""Model Runner V2's sampler skips the fp32 logits copy when no request needs logits processing (#35214).

``enabled: true`` is vLLM's own behaviour; ``enabled: false`` forces the copy, as before the PR. It exists
only in the V2 model runner; where vLLM runs the V1 runner (CPU without triton-cpu, or
``VLLM_USE_V2_MODEL_RUNNER=0``) the strategy is refused with that reason. A release whose V2 sampler never makes
the copy (0.26) has nothing to elide or force: its source fails the requirements.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from strategies.framework.base import Applicability, Param, ProcessContext, Role, Strategy, Upstream
from strategies.framework.patches import Patches
from strategies.framework.requirements import AssignedIn, Defined, Params, Snippet

_SAMPLER = "v1/worker/gpu/sample/sampler.py"  # the V2 model runner's sampler
_APPLY = "Sampler.apply_sampling_params"


class SamplerCopyElision(Strategy):
    name = "sampler_copy_elision"
    description = "V2 sampler: skip the fp32 logits copy for plain sampling (false: always copy)."
    params = (Param("enabled", "bool", True, help="true: vLLM's native elision; false: force the copy"),)
    roles = frozenset({Role.WORKER})
    switchable = True
    step_switchable = True  # the copy is made (or elided) inside the batch's own sample_tokens
    requires = (
        AssignedIn(_SAMPLER, "Sampler.__init__", attribute="needs_logits_processing"),
        # The elision and the copy that `enabled: false` reproduces, as vLLM writes them.
        Snippet(_SAMPLER, _APPLY, text="if not np.any(self.needs_logits_processing[idx_mapping_np]):"),
        Snippet(_SAMPLER, _APPLY, text="torch.empty_like(logits, dtype=torch.float32).copy_(logits)"),
        Params(_SAMPLER, _APPLY, names=("self", "logits", "expanded_idx_mapping", "idx_mapping", "idx_mapping_np")),
        Defined("config/vllm.py", "VllmConfig.use_v2_model_runner"),
        Defined("triton_utils/__init__.py", "HAS_TRITON"),
    )
    # 0.28: the first release whose elision reads `needs_logits_processing` (0.27 elides through a method the
    # patch does not read, 0.26 never makes the copy); 0.28-0.33 write both lines and the parameters alike.
    vllm_versions = ">=0.28,<0.34"
    upstream = Upstream("0.27", "#47711; the per-request flag this patch reads since 0.28, #52329")
    paths = (
        "V2 model runner only (the GPU default with Triton; on CPU it needs triton-cpu), any scheduling and "
        "executor: the copy lives in the V2 sampler. Refused on the V1 runner (the CPU default) and on vLLM < 0.28, "
        "whose V2 sampler never makes the copy (0.26) or elides it without `needs_logits_processing` (0.27)."
    )

    def __init__(self) -> None:
        super().__init__()
        self.enabled = True
        self._patches = Patches()

    def applicable(self) -> Applicability:
        verdict = super().applicable()
        if not verdict.ok:
            return verdict
        if os.environ.get("VLLM_USE_V2_MODEL_RUNNER") == "0":
            return Applicability(
                False, "VLLM_USE_V2_MODEL_RUNNER=0 selects the V1 model runner, which has no copy elision"
            )
        try:
            from vllm.triton_utils import HAS_TRITON
        except ImportError as exc:
            return Applicability(False, f"cannot tell which model runner vLLM will use: {exc}")
        if not HAS_TRITON and os.environ.get("VLLM_USE_V2_MODEL_RUNNER") != "1":
            return Applicability(
                False,
                "vLLM will run the V1 model runner here (no usable Triton; on CPU the V2 runner needs "
                "triton-cpu), and copy elision exists only in the V2 sampler",
            )
        return Applicability(True)

    def install(self) -> None:
        from vllm.v1.worker.gpu.sample import sampler as s

        self._patches.install((s.Sampler, "apply_sampling_params", lambda original: forcing_copy(original, self)))

    def refuses(self, vllm_config: Any) -> str | None:
        if not getattr(vllm_config, "use_v2_model_runner", False):
            return "this engine runs the V1 model runner; copy elision exists only in the V2 sampler"
        return None

    def apply(self, ctx: ProcessContext, params: dict[str, Any]) -> None:
        self.enabled = params["enabled"]

    def revert(self, ctx: ProcessContext) -> None:
        self.enabled = True


def forcing_copy(original: Callable[..., Any], strategy: SamplerCopyElision) -> Callable[..., Any]:
    """``Sampler.apply_sampling_params`` that, while ``strategy`` is disabled, makes the fp32 copy vLLM elides.

    Arguments are bound by name against ``original``'s signature, so the wrapper reads ``logits`` and
    ``idx_mapping_np`` wherever a release puts them (0.26 and 0.32 order their parameters differently).
    """
    import torch

    signature = inspect.signature(original)

    def apply_sampling_params(sampler: Any, *args: Any, **kwargs: Any) -> Any:
        flags = getattr(sampler, "needs_logits_processing", None)  # absent before the elision existed (0.26)
        if flags is None:
            return original(sampler, *args, **kwargs)
        given = signature.bind(sampler, *args, **kwargs).arguments
        if not np.any(flags[given["idx_mapping_np"]]):  # a batch whose copy vLLM elides
            if strategy.enabled:
                strategy.count("elided")  # vLLM's own path ran: proof the strategy's setting was in force
            else:
                strategy.count("forced_copy")
                return torch.empty_like(given["logits"], dtype=torch.float32).copy_(given["logits"])
        return original(sampler, *args, **kwargs)

    return apply_sampling_params
