"""Model Runner V2's sampler skips the fp32 logits copy when no request needs logits processing (#35214).

``enabled: true`` is vLLM's own behaviour; ``enabled: false`` forces the copy, as before the PR. It exists
only in the V2 model runner; where vLLM runs the V1 runner (CPU without triton-cpu, or
``VLLM_USE_V2_MODEL_RUNNER=0``) the strategy is refused with that reason.
"""

from __future__ import annotations

import os
from typing import Any

from strategies.base import Applicability, Param, ProcessContext, Role, Strategy


class SamplerCopyElision(Strategy):
    name = "sampler_copy_elision"
    description = "V2 sampler: skip the fp32 logits copy for plain sampling (false: always copy)."
    params = (Param("enabled", "bool", True, help="true: vLLM's native elision; false: force the copy"),)
    roles = frozenset({Role.WORKER})
    switchable = True

    def __init__(self) -> None:
        super().__init__()
        self.enabled = True
        self._installed = False

    def applicable(self) -> Applicability:
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
        try:
            from vllm.v1.worker.gpu.sample.sampler import Sampler
        except Exception as exc:
            return Applicability(False, f"this vLLM has no V2 sampler: {exc}")
        if not hasattr(Sampler, "apply_sampling_params"):
            return Applicability(False, "the V2 Sampler has no apply_sampling_params in this vLLM")
        return Applicability(True)

    def install(self) -> None:
        if self._installed:
            return
        import numpy as np
        import torch
        from vllm.v1.worker.gpu.sample import sampler as s

        original = s.Sampler.apply_sampling_params

        def apply_sampling_params(
            sampler: Any,
            logits: Any,
            expanded_idx_mapping: Any,
            idx_mapping: Any,
            idx_mapping_np: Any,
            *args: Any,
            **kwargs: Any,
        ) -> Any:
            if not self.enabled and not np.any(sampler.needs_logits_processing[idx_mapping_np]):
                self.count("forced_copy")
                return torch.empty_like(logits, dtype=torch.float32).copy_(logits)
            return original(sampler, logits, expanded_idx_mapping, idx_mapping, idx_mapping_np, *args, **kwargs)

        s.Sampler.apply_sampling_params = apply_sampling_params  # type: ignore[method-assign]
        self._installed = True

    def apply(self, ctx: ProcessContext, params: dict[str, Any]) -> None:
        if ctx.vllm_config is not None and not getattr(ctx.vllm_config, "use_v2_model_runner", False):
            raise RuntimeError("this worker runs the V1 model runner; copy elision exists only in V2")
        self.enabled = params["enabled"]

    def revert(self, ctx: ProcessContext) -> None:
        self.enabled = True
