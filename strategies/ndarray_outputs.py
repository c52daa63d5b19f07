"""Sampled token ids as numpy rows instead of ``list[list[int]]`` (vLLM #26368/#28771, both reverted).

A decode step builds one Python list per running request for the sampled ids, in the worker; they are
pickled to EngineCore and unpickled into as many lists again. Numpy rows are not tracked by the GC.
Upstream reverted this twice because the conversions cost more than the GC saved, so it is measured here,
not assumed.

How it is applied (the V1 model runner's synchronous path, the CPU default):

- worker: ``GPUModelRunner._bookkeeping_sync`` is rebuilt from vLLM's own source with the five
  list-specific lines rewritten for arrays. Each rewrite must match exactly once, so a vLLM whose code moved
  is refused with the reason instead of being patched wrongly;
- EngineCore: ``Scheduler.update_from_output`` turns the rows back into lists at its entry, as upstream's
  minimal version did, so every later consumer (stop checks, structured output, msgspec) sees lists.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable
from functools import cache
from typing import Any

import numpy as np

from strategies.base import Param, ProcessContext, Role, Strategy
from strategies.requirements import TESTED_VLLM, Absent, AssignedIn, Params, Snippet

_RUNNER = "v1/worker/gpu_model_runner.py"  # the V1 model runner
_EMPTY_ROW = np.empty(0, dtype=np.int64)

# (vLLM's line, its array-safe replacement); each must occur exactly once in `_bookkeeping_sync`.
_REWRITES = (
    (
        "valid_sampled_token_ids = self._to_list(sampled_token_ids)",
        "valid_sampled_token_ids = _tuner_rows(sampled_token_ids)",
    ),
    ("valid_sampled_token_ids[int(i)].clear()", "valid_sampled_token_ids[int(i)] = _tuner_empty_row"),
    (
        "num_sampled_ids: int = len(sampled_ids) if sampled_ids else 0",
        "num_sampled_ids: int = len(sampled_ids) if sampled_ids is not None else 0",
    ),
    ("if not sampled_ids:", "if not num_sampled_ids:"),
    (
        "req_state.output_token_ids.extend(sampled_ids)",
        "req_state.output_token_ids.extend(_tuner_as_list(sampled_ids))",
    ),
)


def _as_list(ids: Any) -> list[int]:
    return ids.tolist() if isinstance(ids, np.ndarray) else ids


@cache
def _rewritten_bookkeeping() -> tuple[Callable[..., Any] | None, str]:
    """vLLM's ``_bookkeeping_sync`` with the array rewrites, or ``(None, reason)``."""
    from vllm.v1.worker import gpu_model_runner as module

    try:
        source = textwrap.dedent(inspect.getsource(module.GPUModelRunner._bookkeeping_sync))
    except (AttributeError, OSError, TypeError) as exc:
        return None, f"cannot read GPUModelRunner._bookkeeping_sync: {exc}"
    if "super()" in source:
        return None, "GPUModelRunner._bookkeeping_sync calls super(), which a rebuilt copy cannot"
    for old, new in _REWRITES:
        if source.count(old) != 1:
            return None, f"vLLM's _bookkeeping_sync changed: expected `{old}` exactly once"
        source = source.replace(old, new)
    namespace = dict(vars(module))
    namespace.update(_tuner_rows=None, _tuner_empty_row=_EMPTY_ROW, _tuner_as_list=_as_list)
    exec(compile(source, f"<tuner rewrite of {module.__file__}>", "exec"), namespace)
    return namespace["_bookkeeping_sync"], ""


class NdarrayOutputs(Strategy):
    name = "ndarray_outputs"
    description = "Sampled token ids as numpy rows from the model runner to the scheduler (not lists)."
    params = (Param("enabled", "bool", True, help="true: numpy rows; false: vLLM's lists"),)
    roles = frozenset({Role.WORKER, Role.ENGINE_CORE})
    switchable = True
    requires = (
        *(Snippet(_RUNNER, "GPUModelRunner._bookkeeping_sync", text=old) for old, _ in _REWRITES),
        Snippet(_RUNNER, "GPUModelRunner._bookkeeping_sync", text="super()", count=0),
        AssignedIn(_RUNNER, "GPUModelRunner.__init__", attribute="use_async_scheduling"),
        Params(
            "v1/core/sched/scheduler.py",
            "Scheduler.update_from_output",
            names=("self", "scheduler_output", "model_runner_output"),
        ),
        Absent(
            "v1/core/sched/async_scheduler.py",
            "AsyncScheduler.update_from_output",
            because="the rows are turned back into lists in Scheduler.update_from_output",
        ),
    )
    vllm_versions = TESTED_VLLM
    paths = (
        "V1 model runner with sync scheduling only (the CPU default; on a GPU: VLLM_USE_V2_MODEL_RUNNER=0 and "
        "--no-async-scheduling). The V2 runner, the GPU default, never calls the V1 _bookkeeping_sync it patches: "
        "a no-op there. V1 with async scheduling or speculative decoding: refused at worker ready."
    )

    def __init__(self) -> None:
        super().__init__()
        self.enabled = False
        self._installed = False

    def install(self) -> None:
        if self._installed:
            return
        self._install_scheduler_side()
        self._install_worker_side()
        self._installed = True

    def _install_scheduler_side(self) -> None:
        from vllm.v1.core.sched.scheduler import Scheduler

        original = Scheduler.update_from_output

        def update_from_output(scheduler: Any, scheduler_output: Any, model_runner_output: Any) -> Any:
            rows = getattr(model_runner_output, "sampled_token_ids", None)
            if rows and any(isinstance(row, np.ndarray) for row in rows):
                model_runner_output.sampled_token_ids = [_as_list(row) for row in rows]
                self.count("rows_to_lists")
            return original(scheduler, scheduler_output, model_runner_output)

        Scheduler.update_from_output = update_from_output  # type: ignore[method-assign]

    def _install_worker_side(self) -> None:
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner

        rewritten, reason = _rewritten_bookkeeping()
        if rewritten is None:
            raise RuntimeError(reason)
        rewritten.__globals__["_tuner_rows"] = self._rows
        original = GPUModelRunner._bookkeeping_sync

        def _bookkeeping_sync(runner: Any, *args: Any, **kwargs: Any) -> Any:
            if self.enabled and not runner.use_async_scheduling:
                return rewritten(runner, *args, **kwargs)
            return original(runner, *args, **kwargs)

        GPUModelRunner._bookkeeping_sync = _bookkeeping_sync  # type: ignore[method-assign]

    def _rows(self, sampled_token_ids: Any) -> list[np.ndarray]:
        """One host copy of the sampled ids, handed out as a list of untracked numpy rows."""
        array = sampled_token_ids.to("cpu").numpy()
        self.count("ndarray_steps")
        return list(array)

    def apply(self, ctx: ProcessContext, params: dict[str, Any]) -> None:
        if ctx.role is Role.WORKER and ctx.owner is not None:
            runner = getattr(ctx.owner, "model_runner", None)
            if getattr(runner, "use_async_scheduling", False):
                raise RuntimeError("async scheduling is on: its output path is not patched by ndarray_outputs")
            if ctx.vllm_config is not None and ctx.vllm_config.speculative_config is not None:
                raise RuntimeError("speculative decoding consumes the lists directly; not patched")
        self.enabled = params["enabled"]

    def revert(self, ctx: ProcessContext) -> None:
        self.enabled = False
