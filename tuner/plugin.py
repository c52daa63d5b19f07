"""The ``vllm.general_plugins`` entry point: the tuner's code inside every vLLM process.

vLLM calls :func:`register` in process 0, in EngineCore and in every worker (spawned or forked). It does
nothing unless the environment variable ``TUNER_PLUGIN`` holds a JSON spec::

    {"strategies": {"gc_threshold": {"gen0_per_seq": 8}},   # applied when each process is ready
     "install": ["gc_freeze"]}                                # also patched, so it can be switched on later

With a spec it installs the GC probe, hooks the points where each process becomes ready (front-end engine
built, EngineCore built, worker warmed up), applies the requested strategies there, and adds the control
method ``tuner_control`` to ``EngineCore`` (a utility call) and to the worker base class (``collective_rpc``)
so that a running engine can be asked for telemetry and switched between strategy sets.

To enable a strategy set in production ``vllm serve``, install this package and export the same variable::

    TUNER_PLUGIN='{"strategies": {"gc_threshold": {"gen0_per_seq": 8}}}' vllm serve MODEL
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
from collections.abc import Callable
from typing import Any

from strategies import ProcessContext, Role, Strategy
from strategies import get as get_strategy
from tuner.gc_probe import GcProbe
from tuner.interleave_engine import StepInterleaver

ENV_VAR = "TUNER_PLUGIN"
CONTROL_METHOD = "tuner_control"
logger = logging.getLogger("tuner.plugin")


def encode_spec(strategies: dict[str, dict[str, Any]], install: list[str] | None = None) -> str:
    """The ``TUNER_PLUGIN`` value that applies ``strategies`` and can later switch to any of ``install``."""
    names = sorted(set(strategies) | set(install or ()))
    return json.dumps({"strategies": strategies, "install": names}, sort_keys=True)


class ProcessState:
    """Everything the plugin keeps in one process: roles, active strategies, telemetry."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.requested: dict[str, dict[str, Any]] = dict(spec.get("strategies", {}))
        self.installable = sorted(set(spec.get("install", [])) | set(self.requested))
        self.contexts: dict[Role, ProcessContext] = {}
        self.active: dict[str, dict[str, Any]] = {}
        self.errors: dict[str, str] = {}
        self.probe = GcProbe()
        self.interleaver = StepInterleaver(self)

    def install(self) -> None:
        self.probe.install()
        for name in self.installable:
            try:
                get_strategy(name).install()
            except Exception as exc:
                self.errors[name] = f"install failed: {exc}"
                logger.error("tuner: strategy %s could not be installed: %s", name, exc)

    def on_ready(self, role: Role, vllm_config: Any, owner: Any) -> None:
        """A process of ``role`` finished starting: apply what was requested for that role (once)."""
        if role in self.contexts:
            return
        self.contexts[role] = ProcessContext(role=role, vllm_config=vllm_config, owner=owner)
        for name, params in self.requested.items():
            strategy = get_strategy(name)
            if name not in self.active and role in strategy.roles:
                self._apply(strategy, self.contexts[role], params)
        if role is Role.FRONTEND and self.spec.get("control"):
            # A server front-end (`vllm serve`) is reached over a loopback control endpoint.
            from tuner.control_server import start_control_server

            try:
                start_control_server(self, owner, self.spec["control"])
            except (OSError, RuntimeError) as exc:  # e.g. a second API-server process: another one serves it
                logger.error("tuner: no control endpoint in this process: %s", exc)

    def _apply(self, strategy: Strategy, ctx: ProcessContext, params: dict[str, Any]) -> None:
        if strategy.name in self.errors:
            return
        try:
            strategy.apply(ctx, strategy.resolve_params(params))
            self.active[strategy.name] = strategy.resolve_params(params)
        except Exception as exc:
            self.errors[strategy.name] = str(exc)
            logger.error("tuner: strategy %s not applied in %s: %s", strategy.name, ctx.role.value, exc)

    def retire(self) -> None:
        """Undo this state's strategies and telemetry in this process (a new engine brings a new spec)."""
        self.switch({})
        self.probe.uninstall()

    def context_for(self, strategy: Strategy) -> ProcessContext | None:
        return next((self.contexts[r] for r in Role if r in strategy.roles and r in self.contexts), None)

    def switch(self, wanted: dict[str, dict[str, Any]]) -> None:
        """Move from the active set to ``wanted`` (only switchable strategies may change)."""
        self.errors = {n: e for n, e in self.errors.items() if e.startswith("install failed")}
        for name in list(self.active):
            strategy = get_strategy(name)
            if name in wanted and strategy.resolve_params(wanted[name]) == self.active[name]:
                continue
            ctx = self.context_for(strategy)
            if ctx is not None:
                strategy.revert(ctx)
            del self.active[name]
        for name, params in wanted.items():
            strategy = get_strategy(name)
            ctx = self.context_for(strategy)
            if name in self.active or ctx is None:
                continue
            if name not in self.installable:
                self.errors[name] = "not installed at engine start (list it in the plugin spec's install)"
                continue
            self._apply(strategy, ctx, params)
        self.requested = dict(wanted)

    def report(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "process_name": multiprocessing.current_process().name,
            "roles": sorted(role.value for role in self.contexts),
            "active": dict(self.active),
            "errors": dict(self.errors),
            "counters": {name: dict(get_strategy(name).counters) for name in self.installable},
            "gc": self.probe.snapshot(),
        }

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """Serve one control request: ``{"op": "report"|"reset"|"switch"|"interleave_*", ...}``."""
        op = request.get("op")
        interleave = None
        if op == "switch":
            self.switch(request["strategies"])
        elif op in {"interleave_start", "interleave_drain", "interleave_stop"}:
            interleave = self._interleave(op, request)
        elif op == "reset":
            self.probe.reset()
            for name in self.installable:
                get_strategy(name).counters.clear()
        elif op != "report":
            raise ValueError(f"unknown tuner control op {op!r}")
        report = self.report()
        if interleave is not None:
            report["interleave"] = interleave
        return report

    def _interleave(self, op: str, request: dict[str, Any]) -> dict[str, Any] | None:
        """Step-level A/B runs where the steps are: in the EngineCore process only."""
        if Role.ENGINE_CORE not in self.contexts:
            return None
        if op == "interleave_start":
            arms = {"A": request["a"], "B": request["b"]}
            for name in {*request["a"], *request["b"]}:
                if not get_strategy(name).step_switchable:
                    raise ValueError(f"{name} cannot be switched between engine steps: use run-level pairs")
            self.interleaver.start(arms, int(request["block_steps"]), int(request.get("seed", 0)))
            return {"started": True}
        return self.interleaver.drain() if op == "interleave_drain" else self.interleaver.stop()


_state: ProcessState | None = None


def state() -> ProcessState | None:
    """This process's plugin state, or None when the plugin is not enabled here."""
    return _state


def register() -> None:
    """vLLM entry point (``vllm.general_plugins``): no-op without ``TUNER_PLUGIN`` or when its spec is in force.

    vLLM calls it once per process; a process that starts a second engine calls it again itself, and a changed
    spec then replaces the first engine's state (its strategies reverted) instead of being ignored.
    """
    global _state
    raw = os.environ.get(ENV_VAR)
    if not raw:
        return
    try:
        spec = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise RuntimeError(f"{ENV_VAR} is not valid JSON: {exc}") from exc
    if _state is not None:
        if _state.spec == spec:
            return
        _state.retire()
    _state = ProcessState(spec)
    _install_hooks()
    _state.install()


def _current() -> ProcessState:
    assert _state is not None, "tuner hooks run only after register()"
    return _state


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


def _engine_core_control(engine_core: Any, request: dict[str, Any]) -> list[dict[str, Any]]:
    """``EngineCore.tuner_control``: this process's report plus every worker's."""
    process = _current()
    reports = [process.handle(request)]
    if Role.WORKER not in process.contexts:  # workers live in their own processes (mp executor)
        reports += engine_core.model_executor.collective_rpc(CONTROL_METHOD, args=(request,))
    return reports


def _worker_control(worker: Any, request: dict[str, Any]) -> dict[str, Any]:
    return _current().handle(request)


def _wrap_steps(engine_core_cls: type) -> None:
    """Route every engine step through the interleaver, and note each step's scheduled tokens."""
    from vllm.v1.core.sched.scheduler import Scheduler

    for method in ("step", "step_with_batch_queue"):
        original = engine_core_cls.__dict__.get(method)
        if original is None or getattr(original, "_tuner_hooked", False):
            continue

        def stepped(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            if _state is None:
                return _original(self, *args, **kwargs)
            return _state.interleaver.around_step(self, lambda: _original(self, *args, **kwargs))

        stepped._tuner_hooked = True  # type: ignore[attr-defined]
        setattr(engine_core_cls, method, stepped)
    schedule = Scheduler.schedule
    if not getattr(schedule, "_tuner_hooked", False):

        def scheduled(self: Any, *args: Any, **kwargs: Any) -> Any:
            output = schedule(self, *args, **kwargs)
            self._tuner_scheduled_tokens = output.total_num_scheduled_tokens
            return output

        scheduled._tuner_hooked = True  # type: ignore[attr-defined]
        Scheduler.schedule = scheduled  # type: ignore[method-assign]


def _install_hooks() -> None:
    """Hook vLLM's classes once per process; the hooks act on whichever state is current."""

    def ready(role: Role) -> Callable[[Any], None]:
        def on_ready(owner: Any) -> None:
            if _state is not None:
                _state.on_ready(role, getattr(owner, "vllm_config", None), owner)

        return on_ready

    from vllm.v1.engine import core
    from vllm.v1.engine.core import EngineCore
    from vllm.v1.worker.worker_base import WorkerBase

    # In-process engines are ready after __init__; a spawned EngineCore loads this plugin from inside its
    # own __init__ (too late to wrap it), so it becomes ready when its busy loop starts.
    _hook(EngineCore, "__init__", ready(Role.ENGINE_CORE))
    _wrap_steps(EngineCore)
    for cls_name in ("EngineCoreProc", "DPEngineCoreProc"):
        if hasattr(core, cls_name):
            _hook(getattr(core, cls_name), "run_busy_loop", ready(Role.ENGINE_CORE), before=True)
    EngineCore.tuner_control = _engine_core_control  # type: ignore[attr-defined]
    WorkerBase.tuner_control = _worker_control  # type: ignore[attr-defined]
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
