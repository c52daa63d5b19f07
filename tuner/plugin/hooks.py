"""Where the plugin enters vLLM: the ready hooks, the step wrap and the control methods, installed once per process.

The hooks hold no state of their own: each asks ``current()`` for the process's plugin state
(:class:`tuner.plugin.process.ProcessState`, seen here only through :class:`PluginProcess`) when it runs, so a
second engine in the same process, which brings a new state, is served by the same hooks.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from strategies import ProcessContext, Role
from tuner.plugin.intervals import IntervalRing
from tuner.plugin.protocol import CONTROL_METHOD, PLUGIN_ERROR, STEP_TAG_ATTRIBUTE, ControlRequest, ProcessReport
from tuner.plugin.step_interleaver import StepArms, StepInterleaver

logger = logging.getLogger("tuner.plugin")


class PluginProcess(Protocol):
    """What the hooks need from a process's plugin state."""

    contexts: dict[Role, ProcessContext]
    errors: dict[str, str]
    interleaver: StepInterleaver
    step_arms: StepArms
    steps: IntervalRing
    telemetry: bool

    def on_ready(self, role: Role, vllm_config: Any, owner: Any) -> None: ...

    def handle(self, request: ControlRequest) -> ProcessReport: ...


Current = Callable[[], PluginProcess | None]


def _hook(cls: type, method: str, callback: Callable[[Any], None], *, before: bool = False) -> None:
    """Run ``callback(self)`` after (or before) ``cls.method``, only where ``cls`` itself defines it."""
    original = cls.__dict__.get(method)
    if original is None or getattr(original, "_tuner_hooked", False):
        return

    def hooked(self: Any, *args: Any, **kwargs: Any) -> Any:
        if before:
            callback(self)
        result = original(self, *args, **kwargs)
        if not before:
            callback(self)
        return result

    hooked._tuner_hooked = True  # type: ignore[attr-defined]
    hooked.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(cls, method, hooked)


def _control_methods(current: Current) -> tuple[Callable[..., list[ProcessReport]], Callable[..., ProcessReport]]:
    def engine_core_control(engine_core: Any, request: ControlRequest) -> list[ProcessReport]:
        """``EngineCore.tuner_control``: this process's report plus every worker's."""
        process = current()
        assert process is not None, "tuner hooks run only after register()"
        reports = [process.handle(request)]
        if Role.WORKER not in process.contexts:  # workers live in their own processes (mp executor)
            reports += engine_core.model_executor.collective_rpc(CONTROL_METHOD, args=(request,))
        return reports

    def worker_control(worker: Any, request: ControlRequest) -> ProcessReport:
        process = current()
        assert process is not None, "tuner hooks run only after register()"
        return process.handle(request)

    return engine_core_control, worker_control


def _wrap_steps(engine_core_cls: type, current: Current) -> None:
    """Route every engine step through the interleaver, which tags each scheduled batch with its arm."""
    from vllm.v1.core.sched.scheduler import Scheduler

    for method in ("step", "step_with_batch_queue"):
        original = engine_core_cls.__dict__.get(method)
        if original is None or getattr(original, "_tuner_hooked", False):
            continue

        def stepped(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            process = current()
            if process is None:
                return _original(self, *args, **kwargs)
            started = time.monotonic()
            result = process.interleaver.around_step(self, lambda: _original(self, *args, **kwargs))
            if process.telemetry:
                process.steps.add(started, time.monotonic(), process.interleaver.scheduled_tokens)
            return result

        stepped._tuner_hooked = True  # type: ignore[attr-defined]
        setattr(engine_core_cls, method, stepped)
    schedule = Scheduler.schedule
    if not getattr(schedule, "_tuner_hooked", False):

        def scheduled(self: Any, *args: Any, **kwargs: Any) -> Any:
            output = schedule(self, *args, **kwargs)
            process = current()
            if process is not None:
                process.interleaver.tag(output)
            return output

        scheduled._tuner_hooked = True  # type: ignore[attr-defined]
        Scheduler.schedule = scheduled  # type: ignore[method-assign]


def _wrap_worker_batches(current: Current) -> None:
    """Every worker applies each batch's arm before it executes the batch (``WorkerWrapperBase.execute_model``, the
    entry of every executor). Under the ``uni`` executor the worker shares EngineCore's process, which has put the
    arm in force itself."""
    from vllm.v1.worker.worker_base import WorkerWrapperBase

    execute_model = WorkerWrapperBase.__dict__["execute_model"]
    if getattr(execute_model, "_tuner_hooked", False):
        return

    def execute(self: Any, scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
        process, tag = current(), getattr(scheduler_output, STEP_TAG_ATTRIBUTE, None)
        if process is not None and tag is not None and Role.ENGINE_CORE not in process.contexts:
            process.step_arms.batch(tag)
        return execute_model(self, scheduler_output, *args, **kwargs)

    execute._tuner_hooked = True  # type: ignore[attr-defined]
    WorkerWrapperBase.execute_model = execute  # type: ignore[method-assign]


def install_hooks(current: Current) -> None:
    """Hook vLLM's classes once per process; the hooks act on whichever state ``current()`` returns."""

    def ready(role: Role) -> Callable[[Any], None]:
        def on_ready(owner: Any) -> None:
            process = current()
            if process is None:
                return
            try:
                process.on_ready(role, getattr(owner, "vllm_config", None), owner)
            except Exception as exc:  # never into vLLM's start-up: reported, and the tuner refuses to measure
                logger.error("tuner: the %s ready hook failed: %s: %s", role.value, type(exc).__name__, exc)
                process.errors[PLUGIN_ERROR] = f"the {role.value} ready hook failed: {type(exc).__name__}: {exc}"

        return on_ready

    from vllm.v1.engine import core
    from vllm.v1.engine.core import EngineCore
    from vllm.v1.worker.worker_base import WorkerBase

    # In-process engines are ready after __init__; a spawned EngineCore loads this plugin from inside its
    # own __init__ (too late to wrap it), so it becomes ready when its busy loop starts.
    _hook(EngineCore, "__init__", ready(Role.ENGINE_CORE))
    _wrap_steps(EngineCore, current)
    _wrap_worker_batches(current)
    for cls_name in ("EngineCoreProc", "DPEngineCoreProc"):
        if hasattr(core, cls_name):
            _hook(getattr(core, cls_name), "run_busy_loop", ready(Role.ENGINE_CORE), before=True)
    engine_core_control, worker_control = _control_methods(current)
    setattr(EngineCore, CONTROL_METHOD, engine_core_control)
    setattr(WorkerBase, CONTROL_METHOD, worker_control)
    for module, cls_name in (("vllm.v1.worker.gpu_worker", "Worker"), ("vllm.v1.worker.cpu_worker", "CPUWorker")):
        try:
            cls = getattr(__import__(module, fromlist=[cls_name]), cls_name)
        except Exception:  # not importable on this platform
            continue
        _hook(cls, "compile_or_warm_up_model", ready(Role.WORKER))
    from vllm.v1.engine.async_llm import AsyncLLM
    from vllm.v1.engine.llm_engine import LLMEngine

    for cls in (LLMEngine, AsyncLLM):
        _hook(cls, "__init__", ready(Role.FRONTEND))
