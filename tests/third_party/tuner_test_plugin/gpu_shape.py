"""A test-only vLLM plugin: run the CPU engine in the topology a GPU runs by default, as far as vLLM allows.

vLLM's CPU platform forces three settings in ``CpuPlatform.check_and_update_config``: the ``mp`` executor (the
worker in its own process), the ``spawn`` start method and synchronous scheduling. With ``TUNER_TEST_GPU_SHAPE``
set to a comma-separated subset of ``uni``, ``fork`` and ``async``, this plugin undoes those after the platform
ran, the way a GPU host gets them: the worker inside EngineCore, EngineCore forked, async scheduling.
"""

from __future__ import annotations

import os
from typing import Any

ENV_VAR = "TUNER_TEST_GPU_SHAPE"


def register() -> None:
    """``vllm.general_plugins`` entry point: patch the CPU platform once per process when asked."""
    wanted = {part.strip() for part in os.environ.get(ENV_VAR, "").split(",") if part.strip()}
    if not wanted:
        return
    from vllm.platforms.cpu import CpuPlatform

    original = CpuPlatform.__dict__["check_and_update_config"].__func__
    if getattr(original, "_gpu_shape", False):
        return

    def check_and_update_config(cls: Any, vllm_config: Any) -> None:
        original(cls, vllm_config)
        if "uni" in wanted:
            vllm_config.parallel_config.distributed_executor_backend = "uni"
        if "async" in wanted:
            vllm_config.scheduler_config.async_scheduling = True
        if "fork" in wanted:
            os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "fork"

    check_and_update_config._gpu_shape = True  # type: ignore[attr-defined]
    CpuPlatform.check_and_update_config = classmethod(check_and_update_config)  # type: ignore[method-assign, assignment]
