"""Spin or block on the CUDA events a GPU worker waits for each step (GPU engines with async scheduling only).

Under async scheduling the worker's host side waits on CUDA events every step: the runner's input-preparation
event (made once, synchronized at the start of each step's input preparation) and each step's output-copy event
(made anew for every step's output, synchronized when the next step collects it). Since vLLM 0.25 (#47081) both are
made with ``blocking=True``: the waiting thread sleeps in the driver until the GPU signals, instead of spinning a
core, because under tensor-parallel contention the spin made ranks stragglers. Spinning answers sooner (no wake-up
latency) and burns the core; which wins depends on the host's cores, the TP degree and the step time.

``blocking: false`` makes every event vLLM's worker asks for with ``blocking=True`` a spinning one: ``install``
replaces ``torch.cuda.Event`` in the worker process by a subclass that reads the setting when an event is made
(vLLM makes them through that module attribute), and ``apply`` re-makes the runner's input-preparation event, made
before any strategy applies. ``blocking: true`` is vLLM's own. Each event made under the setting is counted, the
proof that it acted. The setting switches between runs: an output event made in one step is waited on in the next,
so per step the wait would be charged to the other arm.

Refused without CUDA (the CPU runner makes no CUDA events) and on the V1 runner without async scheduling (it then
makes none of these events).
"""

from __future__ import annotations

from typing import Any

from strategies.framework.base import Param, ProcessContext, Role, Strategy, Upstream
from strategies.framework.patches import Patches
from strategies.framework.requirements import TESTED_VLLM, AssignedIn, Snippet

_RUNNER = "v1/worker/gpu_model_runner.py"
_VLLM_BLOCKING = True  # how vLLM makes these events since 0.25


class EventWait(Strategy):
    name = "event_wait"
    description = "Spin or block on the worker's per-step CUDA events (vLLM: blocking since 0.25)."
    params = (
        Param("blocking", "bool", _VLLM_BLOCKING, help="true: vLLM's blocking events; false: spinning (before 0.25)"),
    )
    roles = frozenset({Role.WORKER})
    switchable = True
    run_level_reason = (
        "an asynchronous step's output event is made in one step and waited on in the next, so at step level each "
        "block's first wait would be charged to the other arm"
    )
    requires = (
        # The events vLLM makes blocking: the input-preparation event (once) and each step's output-copy event
        # (V1 runner and V2 runner), all through `torch.cuda.Event`, read at call time.
        Snippet(_RUNNER, "GPUModelRunner.__init__", text="self.prepare_inputs_event = torch.cuda.Event(blocking=True)"),
        AssignedIn(_RUNNER, "GPUModelRunner.__init__", attribute="prepare_inputs_event"),
        Snippet(_RUNNER, "GPUModelRunner", text="self.prepare_inputs_event.synchronize()"),
        Snippet(_RUNNER, "AsyncGPUModelRunnerOutput.__init__", text="torch.cuda.Event(blocking=True)"),
        Snippet("v1/worker/gpu/async_utils.py", "AsyncOutput.__init__", text="torch.cuda.Event(blocking=True)"),
    )
    vllm_versions = TESTED_VLLM
    upstream = Upstream("", "blocking since 0.25, #47081")
    paths = (
        "GPU workers under async scheduling (the V1 runner's input-preparation and output-copy events) and the V2 "
        "runner's output-copy events; refused on CPU engines and on the V1 runner without async scheduling."
    )

    def __init__(self) -> None:
        super().__init__()
        self.blocking: bool | None = None  # None: not applied here, events are made as vLLM asks
        self._patches = Patches()

    def install(self) -> None:
        import torch

        if not torch.cuda.is_available():  # refused here anyway; vLLM's CPU runner makes stand-in events at start
            return
        self._patches.install((torch.cuda, "Event", lambda event_class: moded_event(event_class, self)))

    def refuses(self, vllm_config: Any) -> str | None:
        device = vllm_config.device_config.device_type
        if device != "cuda":
            return f"the {device} runner makes no CUDA events to wait on"
        if not vllm_config.scheduler_config.async_scheduling and not getattr(vllm_config, "use_v2_model_runner", False):
            return "without async scheduling the V1 runner makes none of these events"
        return None

    def apply(self, ctx: ProcessContext, params: dict[str, Any]) -> None:
        self.blocking = params["blocking"]
        self._remake(ctx)

    def revert(self, ctx: ProcessContext) -> None:
        self.blocking = None
        self._remake(ctx)

    def _remake(self, ctx: ProcessContext) -> None:
        """Make the runner's input-preparation event again under the setting in force (it was made at start)."""
        import torch

        runner = getattr(ctx.owner, "model_runner", None)
        if getattr(runner, "prepare_inputs_event", None) is not None:
            runner.prepare_inputs_event = torch.cuda.Event(blocking=_VLLM_BLOCKING)  # type: ignore[union-attr]
            self.count("events_remade")


def moded_event(event_class: Any, strategy: EventWait) -> Any:
    """A subclass of ``torch.cuda.Event`` whose ``blocking=True`` events follow ``strategy.blocking`` while it is
    applied (every other argument, and every event made while it is not, as the caller asks)."""

    class ModedEvent(event_class):  # type: ignore[misc, valid-type]
        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            if kwargs.get("blocking") is _VLLM_BLOCKING and strategy.blocking is not None:
                kwargs["blocking"] = strategy.blocking
                strategy.count("blocking_events" if strategy.blocking else "spinning_events")
            return event_class.__new__(cls, *args, **kwargs)

    ModedEvent.__name__ = ModedEvent.__qualname__ = event_class.__name__
    return ModedEvent
