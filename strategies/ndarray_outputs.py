"""Sampled token ids as numpy rows instead of ``list[list[int]]`` (vLLM #26368/#28771 reverted, #35446 closed).

A decode step builds one Python list per running request for the sampled ids. Numpy rows are not tracked by the
GC, and one step's rows cross a process boundary as two arrays instead of one list per request. Upstream reverted
this twice because the conversions cost more than the GC saved, so it is measured here, not assumed.

Where the rows are built (worker; EngineCore's own thread under the ``uni`` executor):

- Model Runner V2 (the GPU default, any scheduling, any executor): ``AsyncOutput.get_output`` is rebuilt from
  vLLM's own source with its ``.tolist()`` and ``del token_ids[num_tokens:]`` replaced by one :class:`SampledRows`
  over the step's host array and row lengths, built when the copy event has completed;
- V1 model runner with sync scheduling (the CPU default): ``GPUModelRunner._bookkeeping_sync`` is rebuilt with its
  list-specific lines rewritten for arrays; the host copy goes through the runner's pinned buffer and CUDA event on
  a GPU, as vLLM's own ``_to_list`` does, and is read in place on CPU (``CPUModelRunner._to_list``: ``.tolist()``).

Each rewrite must match exactly once, so a vLLM whose code moved is refused with the reason, not patched wrongly.

Per step: the form is a property of each batch. V1 builds and hands over the rows inside the batch's own
``sample_tokens``; V2 builds them in ``AsyncOutput.get_output``, which runs a step later (after the next batch was
scheduled, possibly under the other arm), so each ``AsyncOutput`` keeps the form in force when it was created.
The scheduler accepts either form from any batch.

Where they turn into lists (EngineCore): in ``Scheduler.update_from_output``, at its one read of a request's row
(``sampled_token_ids[req_index]``), which :class:`SampledRows` answers with a ``list[int]``. Every consumer after
it needs that list: ``Request.append_output_token_ids`` (tests ``isinstance(int)``), the stop checks and their
``del new_token_ids[n:]``, structured output's ``accept_tokens`` and the msgspec-encoded
``EngineCoreOutput.new_token_ids: list[int]``; vLLM hands them this same list. Rows of finished or aborted requests
are never converted.
"""

from __future__ import annotations

import inspect
import sys
import textwrap
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from strategies.framework.base import Param, ProcessContext, Role, Strategy, Upstream
from strategies.framework.patches import Patches
from strategies.framework.requirements import TESTED_VLLM, Absent, AssignedIn, Defined, Order, Params, Snippet

_V1_RUNNER = "v1/worker/gpu_model_runner.py"
_V2_RUNNER = "v1/worker/gpu/model_runner.py"
_V2_OUTPUT = "v1/worker/gpu/async_utils.py"
_SCHEDULER = "v1/core/sched/scheduler.py"
_BOOKKEEPING = "GPUModelRunner._bookkeeping_sync"
_GET_OUTPUT = "AsyncOutput.get_output"
_ROWS_ATTRIBUTE = "_tuner_ndarray"  # on an AsyncOutput: whether its batch hands out numpy rows
_UPDATE = "Scheduler.update_from_output"
_MODULES = {  # where the runner and scheduler classes live (looked up, never imported, by the ready checks)
    "v1": "vllm.v1.worker.gpu_model_runner",
    "v2": "vllm.v1.worker.gpu.model_runner",
    "scheduler": "vllm.v1.core.sched.scheduler",
}
_EMPTY_ROW = np.empty(0, dtype=np.int64)

# V1 (vLLM's line, its array-safe replacement); each must occur exactly once in `_bookkeeping_sync`.
_V1_REWRITES = (
    (
        "valid_sampled_token_ids = self._to_list(sampled_token_ids)",
        "valid_sampled_token_ids = _tuner_rows(self, sampled_token_ids)",
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

# V2: the block of `AsyncOutput.get_output` (dedented) that builds one list per request, and what replaces it.
_V2_LISTS = """\
sampled_token_ids: list[list[int]] = self.sampled_token_ids.tolist()
    num_sampled_tokens: list[int] = self.num_sampled_tokens_np.tolist()
    for token_ids, num_tokens in zip(sampled_token_ids, num_sampled_tokens):
        del token_ids[num_tokens:]
    self.model_runner_output.sampled_token_ids = sampled_token_ids"""
_V2_REWRITES = (
    (
        _V2_LISTS,
        "self.model_runner_output.sampled_token_ids = _tuner_rows(self.sampled_token_ids, self.num_sampled_tokens_np)",
    ),
)
_V1_ASYNC = (
    "the V1 model runner with async scheduling builds its rows in AsyncGPUModelRunnerOutput.get_output, which is "
    "not patched (on a GPU: use the V2 runner, or --no-async-scheduling)"
)
_V1_SPEC = (
    "the V1 model runner with speculative decoding builds its rows in RejectionSampler.parse_output and its "
    "drafters read them as lists; neither is patched"
)


class SampledRows:
    """One step's sampled token ids as numpy rows, where vLLM has ``list[list[int]]``.

    Indexing a row returns it as the ``list[int]`` vLLM would have built for it; length and truth are the number of
    rows, as for vLLM's list. Pickles as its arrays (the ``mp`` executor's worker-to-EngineCore transport).
    """

    __slots__ = ("counts", "rows")

    def __init__(self, rows: np.ndarray | list[np.ndarray], counts: np.ndarray | None = None) -> None:
        self.rows = rows  # V2: one 2-D array, rows padded to the widest; V1: a list of 1-D arrays
        self.counts = counts  # V2: how many ids of each row are valid (vLLM trims the rest)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> list[int]:
        row = self.rows[index]
        if self.counts is not None:
            row = row[: self.counts[index]]
        return cast("list[int]", row.tolist())


def rewrite(source: str, rewrites: tuple[tuple[str, str], ...]) -> str:
    """``source`` (a dedented method) with each of vLLM's texts replaced; ``ValueError`` when one does not occur
    exactly once, so that a vLLM whose code moved is refused instead of patched wrongly."""
    for old, new in rewrites:
        if source.count(old) != 1:
            raise ValueError(f"expected `{old.splitlines()[0]}` exactly once")
        source = source.replace(old, new)
    return source


def rebuild(function: Callable[..., Any], rewrites: tuple[tuple[str, str], ...], **names: Any) -> Callable[..., Any]:
    """``function`` recompiled from its rewritten source, in a copy of its module's globals plus ``names``."""
    where = function.__qualname__
    if function.__code__.co_freevars:  # e.g. `super()`: a copy compiled outside the class has no `__class__` cell
        raise ValueError(f"{where} uses {', '.join(function.__code__.co_freevars)} from an enclosing scope")
    try:
        source = rewrite(textwrap.dedent(inspect.getsource(function)), rewrites)
    except ValueError as exc:
        raise ValueError(f"vLLM's {where} changed: {exc}") from None
    namespace = {**function.__globals__, **names}
    exec(compile(source, f"<tuner rewrite of {where}>", "exec"), namespace)
    rebuilt: Callable[..., Any] = namespace[function.__name__]
    return rebuilt


def host_array(runner: Any, sampled_token_ids: Any) -> np.ndarray:
    """The step's sampled ids as one host array, copied the way the runner's own ``_to_list`` copies them.

    A CPU tensor is read in place (``CPUModelRunner._to_list``: ``.tolist()``). A device tensor goes through the
    runner's pinned buffer and an event (``GPUModelRunner._to_list``, vLLM #22754): a pageable ``.to("cpu")``
    would synchronise the whole stream, a cost vLLM's lists do not pay. The buffer is reused by the next step, so
    the rows get their own copy.
    """
    if sampled_token_ids.device.type == "cpu":
        return sampled_token_ids.numpy()  # type: ignore[no-any-return]
    pinned = runner.sampled_token_ids_pinned_cpu[: sampled_token_ids.shape[0]]
    pinned.copy_(sampled_token_ids, non_blocking=True)
    runner.transfer_event.record()
    runner.transfer_event.synchronize()
    return pinned.numpy().copy()  # type: ignore[no-any-return]


def _as_list(ids: Any) -> list[int]:
    return cast("list[int]", ids.tolist()) if isinstance(ids, np.ndarray) else ids


def path_refusal(vllm_config: Any) -> str | None:
    """Why the strategy cannot act on the code path of an engine with this resolved ``VllmConfig``, or None."""
    if getattr(getattr(vllm_config, "model_config", None), "runner_type", "generate") == "pooling":
        return "a pooling model samples no token ids: there are no rows to carry"
    if getattr(vllm_config, "is_mm_encoder_only", False):
        return "an encoder-only instance samples no token ids: there are no rows to carry"
    if getattr(vllm_config, "use_v2_model_runner", False):
        return None  # AsyncOutput.get_output builds the rows with any scheduling, executor or speculative decoding
    if vllm_config.scheduler_config.async_scheduling:
        return _V1_ASYNC
    if vllm_config.speculative_config is not None:
        return _V1_SPEC
    return None


def runner_refusal(runner: Any) -> str | None:
    """Why this live model runner does not build its rows where the strategy patched them (None when it does)."""
    v2 = sys.modules.get(_MODULES["v2"])
    if v2 is not None and isinstance(runner, v2.GPUModelRunner):
        return None
    v1 = sys.modules.get(_MODULES["v1"])
    if v1 is None or not isinstance(runner, v1.GPUModelRunner):
        return f"the model runner {type(runner).__qualname__} is neither vLLM's V1 nor V2 GPUModelRunner"
    if type(runner)._bookkeeping_sync is not v1.GPUModelRunner._bookkeeping_sync:
        return f"{type(runner).__qualname__} overrides _bookkeeping_sync, where the V1 runner builds its rows"
    return _V1_ASYNC if runner.use_async_scheduling else None


def scheduler_refusal(scheduler: Any) -> str | None:
    """Why this live scheduler does not read the rows through the patched ``update_from_output`` (None when it does)."""
    module = sys.modules.get(_MODULES["scheduler"])
    if module is None or not isinstance(scheduler, module.Scheduler):
        return f"the scheduler {type(scheduler).__qualname__} is not vLLM's Scheduler"
    if type(scheduler).update_from_output is not module.Scheduler.update_from_output:
        return f"{type(scheduler).__qualname__} overrides update_from_output, where the rows reach the scheduler"
    return None


def ready_refusal(ctx: ProcessContext) -> str | None:
    """Why a worker or EngineCore that became ready does not run the patched path (None when it does): its config,
    then what only the live process shows (its model runner or scheduler class)."""
    refusal = path_refusal(ctx.vllm_config) if ctx.vllm_config is not None else None
    if refusal is not None:
        return refusal
    if ctx.role is Role.WORKER:
        return runner_refusal(getattr(ctx.owner, "model_runner", None))
    return scheduler_refusal(getattr(ctx.owner, "scheduler", None))


class NdarrayOutputs(Strategy):
    name = "ndarray_outputs"
    description = "Sampled token ids as numpy rows from the model runner to the scheduler (not lists)."
    params = (Param("enabled", "bool", True, help="true: numpy rows; false: vLLM's lists"),)
    roles = frozenset({Role.WORKER, Role.ENGINE_CORE})
    switchable = True
    step_switchable = True
    requires = (
        # V1: the rewrite anchors, and the pinned buffer and event of the host copy (as vLLM's own `_to_list`).
        *(Snippet(_V1_RUNNER, _BOOKKEEPING, text=old) for old, _ in _V1_REWRITES),
        Snippet(_V1_RUNNER, _BOOKKEEPING, text="super()", count=0),
        AssignedIn(_V1_RUNNER, "GPUModelRunner.__init__", attribute="use_async_scheduling"),
        AssignedIn(_V1_RUNNER, "GPUModelRunner.__init__", attribute="sampled_token_ids_pinned_cpu"),
        AssignedIn(_V1_RUNNER, "GPUModelRunner.__init__", attribute="transfer_event"),
        Snippet(_V1_RUNNER, "GPUModelRunner._to_list", text="self.transfer_event.synchronize()"),
        # V2: the runner's output is an AsyncOutput, whose get_output builds the lists once the copy is complete.
        Snippet(_V2_RUNNER, "GPUModelRunner.sample_tokens", text="async_output = AsyncOutput("),
        *(Snippet(_V2_OUTPUT, _GET_OUTPUT, text=line.strip()) for line in _V2_LISTS.splitlines()),
        Order(_V2_OUTPUT, _GET_OUTPUT, first="self.copy_event.synchronize()", then="self.sampled_token_ids.tolist()"),
        Snippet(_V2_OUTPUT, _GET_OUTPUT, text="super()", count=0),
        # Per step: each AsyncOutput is marked with its batch's form when it is created (no __slots__ to refuse it).
        Defined(_V2_OUTPUT, "AsyncOutput.__init__"),
        Snippet(_V2_OUTPUT, "AsyncOutput", text="__slots__", count=0),
        Defined("config/vllm.py", "VllmConfig.use_v2_model_runner"),
        # EngineCore: the rows are read once per request by index, after a truth test, and nowhere else
        # (4 = `sampled_token_ids = model_runner_output.sampled_token_ids` and that read).
        Params(_SCHEDULER, _UPDATE, names=("self", "scheduler_output", "model_runner_output")),
        Snippet(_SCHEDULER, _UPDATE, text="sampled_token_ids[req_index] if sampled_token_ids else []"),
        Snippet(_SCHEDULER, _UPDATE, text="sampled_token_ids", count=4),
        Absent(
            "v1/core/sched/async_scheduler.py",
            "AsyncScheduler.update_from_output",
            because="the rows are read in Scheduler.update_from_output",
        ),
    )
    vllm_versions = TESTED_VLLM
    upstream = Upstream(None, "merged and reverted upstream, #29121; #35446 (+0.9%) closed unmerged")
    paths = (
        "Model Runner V2 (the GPU default) with any scheduling, executor and speculative decoding: the rows are built "
        "in AsyncOutput.get_output. V1 model runner with sync scheduling (the CPU default; on a GPU with "
        "VLLM_USE_V2_MODEL_RUNNER=0 and --no-async-scheduling). Refused before measuring: V1 with async scheduling "
        "or speculative decoding (rows built in code it does not patch), pooling models and encoder-only instances "
        "(no sampled ids)."
    )

    def __init__(self) -> None:
        super().__init__()
        self.enabled: bool | None = None  # None: not applied here (vLLM's path, not counted)
        self._patches = Patches()

    def install(self) -> None:
        from vllm.v1.core.sched.scheduler import Scheduler
        from vllm.v1.worker.gpu import async_utils
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner

        self._patches.install(  # all rebuilt before any is patched: none or all
            (async_utils.AsyncOutput, "__init__", self.wrap_async_output_init),
            (async_utils.AsyncOutput, "get_output", self.wrap_get_output),
            (GPUModelRunner, "_bookkeeping_sync", self.wrap_bookkeeping),
            (Scheduler, "update_from_output", self.wrap_update_from_output),
        )

    def wrap_async_output_init(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """V2 ``AsyncOutput.__init__`` marking the output with the form in force while its batch is sampled."""

        def __init__(async_output: Any, *args: Any, **kwargs: Any) -> None:
            original(async_output, *args, **kwargs)
            setattr(async_output, _ROWS_ATTRIBUTE, self.enabled)

        return __init__

    def wrap_get_output(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """V2 ``AsyncOutput.get_output`` handing out :class:`SampledRows` when its batch was sampled enabled."""
        rewritten = rebuild(original, _V2_REWRITES, _tuner_rows=self._v2_rows)

        def get_output(async_output: Any) -> Any:
            enabled = getattr(async_output, _ROWS_ATTRIBUTE, self.enabled)
            if enabled:
                return rewritten(async_output)
            if enabled is False:
                self.count("list_steps")
            return original(async_output)

        return get_output

    def wrap_bookkeeping(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """V1 ``GPUModelRunner._bookkeeping_sync`` building numpy rows while enabled."""
        rewritten = rebuild(
            original, _V1_REWRITES, _tuner_rows=self._v1_rows, _tuner_empty_row=_EMPTY_ROW, _tuner_as_list=_as_list
        )

        def _bookkeeping_sync(runner: Any, *args: Any, **kwargs: Any) -> Any:
            if self.enabled:
                return rewritten(runner, *args, **kwargs)
            if self.enabled is False:
                self.count("list_steps")
            return original(runner, *args, **kwargs)

        return _bookkeeping_sync

    def wrap_update_from_output(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """``Scheduler.update_from_output`` counting what reached it, V1's rows wrapped to be read as lists."""

        def update_from_output(scheduler: Any, scheduler_output: Any, model_runner_output: Any) -> Any:
            rows = model_runner_output.sampled_token_ids
            if isinstance(rows, SampledRows):
                self.count("rows_to_lists")
            elif rows and isinstance(rows[0], np.ndarray):  # V1 builds a list of rows (its bookkeeping indexes it)
                model_runner_output.sampled_token_ids = SampledRows(rows)
                self.count("rows_to_lists")
            elif rows and self.enabled is False:
                self.count("lists_received")
            return original(scheduler, scheduler_output, model_runner_output)

        return update_from_output

    def _v2_rows(self, sampled_token_ids: np.ndarray, num_sampled_tokens: np.ndarray) -> SampledRows:
        self._handed_out(len(sampled_token_ids))
        return SampledRows(sampled_token_ids, num_sampled_tokens)

    def _v1_rows(self, runner: Any, sampled_token_ids: Any) -> list[np.ndarray]:
        array = host_array(runner, sampled_token_ids)
        self._handed_out(len(array))
        return list(array)

    def _handed_out(self, rows: int) -> None:
        self.count("ndarray_steps")
        self.count("ndarray_rows", rows)

    def refuses(self, vllm_config: Any) -> str | None:
        return path_refusal(vllm_config)

    def apply(self, ctx: ProcessContext, params: dict[str, Any]) -> None:
        refusal = ready_refusal(ctx)
        if refusal:
            raise RuntimeError(refusal)
        self.enabled = params["enabled"]

    def revert(self, ctx: ProcessContext) -> None:
        self.enabled = None
