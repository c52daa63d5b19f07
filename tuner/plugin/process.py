"""The plugin's state in one vLLM process: strategies applied at each role's ready point, telemetry, control.

One :class:`ProcessState` per process and spec (see :mod:`tuner.plugin` for the spec); a forked child starts its
own from the same spec. Reports go out as :class:`tuner.plugin.protocol.ProcessReport`.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from typing import Any

from strategies import ProcessContext, Role, Strategy
from strategies import get as get_strategy
from strategies.framework import wait_points
from tuner.plugin.gc_probe import GcProbe
from tuner.plugin.hooks import install_hooks
from tuner.plugin.intervals import IntervalRing
from tuner.plugin.protocol import (
    ENV_VAR,
    PLUGIN_ERROR,
    ControlRequest,
    InterleaveBlocks,
    InterleaveStart,
    PluginSpec,
    ProcessReport,
    StrategySet,
    decode_spec,
    offer_local_control,
)
from tuner.plugin.step_interleaver import StepArms, StepInterleaver

RAY_COPY_VAR = "VLLM_RAY_EXTRA_ENV_VARS_TO_COPY"
logger = logging.getLogger("tuner.plugin")


class ProcessState:
    """Everything the plugin keeps in one process: roles, active strategies, telemetry."""

    def __init__(self, spec: PluginSpec) -> None:
        self.pid = os.getpid()  # plugin state belongs to one process (a forked child starts its own)
        self.forked = False  # rebuilt in a child that inherited its parent's state through fork
        self.spec = spec
        self.requested: dict[str, dict[str, Any]] = dict(spec["strategies"])
        self.installable = sorted(set(spec["install"]) | set(self.requested))
        self.contexts: dict[Role, ProcessContext] = {}
        self.active: dict[str, dict[str, Any]] = {}
        self.errors: dict[str, str] = {}
        self.probe = GcProbe()
        self.steps = IntervalRing()  # EngineCore's engine steps (tag: scheduled tokens), for the tail-latency join
        self.telemetry = True  # GC timing and step intervals; off only to measure what they cost
        self.step_arms = StepArms(self.switch, self.probe.allocated)  # a step comparison's arms, in every process
        self.interleaver = StepInterleaver(self.step_arms, self._gc_clock)

    def _gc_clock(self) -> float:
        """EngineCore's GC clock for the interleaver: critical GC seconds so far."""
        return sum(self.probe.classes["critical"].seconds)

    def install(self) -> None:
        self.probe.install()
        missing = wait_points.install()  # GC pauses are classified hidden or critical at them
        if missing:  # reported; collections there then count as critical
            self.errors["wait_points"] = "install failed: " + "; ".join(missing)
        for name in self.installable:
            try:
                # No source check here: parsing vLLM's sources in every engine process would leave garbage for
                # the GC it measures. The tuner checks before any engine starts; a patch that does not fit fails
                # its own install, and the error is reported.
                get_strategy(name).install()
            except Exception as exc:
                self.errors[name] = f"install failed: {exc}"
                logger.error("tuner: strategy %s could not be installed: %s", name, exc)

    def on_ready(self, role: Role, vllm_config: Any, owner: Any) -> None:
        """A process of ``role`` finished starting: apply what was requested for that role.

        A new owner of the role (a second engine in this process) replaces the previous context: strategies of
        that role are re-applied with the new engine's config (e.g. gc_threshold's ``max_num_seqs``).
        """
        previous = self.contexts.get(role)
        if previous is not None and previous.owner is owner:
            return
        context = ProcessContext(role=role, vllm_config=vllm_config, owner=owner)
        for name in list(self.active):
            strategy = get_strategy(name)
            if previous is not None and self.context_for(strategy) is previous:
                strategy.revert(previous)
                del self.active[name]
        self.contexts[role] = context
        for name, params in self.requested.items():
            strategy = get_strategy(name)
            if name not in self.active and role in strategy.roles:
                if not self.errors.get(name, "").startswith("install failed"):
                    self.errors.pop(name, None)  # a refusal on the previous engine's path does not carry over
                self._apply(strategy, context, params)
        control = self.spec.get("control")
        if role is Role.FRONTEND and control:
            # A server front-end (`vllm serve`) is reached over a loopback control endpoint.
            from tuner.plugin.control_endpoint import start_control_endpoint

            try:
                start_control_endpoint(self.handle, owner, control)
            except (OSError, RuntimeError) as exc:  # e.g. a second API-server process: another one serves it
                logger.error("tuner: no control endpoint in this process: %s", exc)

    def _apply(self, strategy: Strategy, ctx: ProcessContext, params: dict[str, Any]) -> None:
        if strategy.name in self.errors:
            return
        try:
            refusal = strategy.refuses(ctx.vllm_config) if ctx.vllm_config is not None else None
            if refusal:
                raise RuntimeError(refusal)
            strategy.apply(ctx, strategy.resolve_params(params))
            self.active[strategy.name] = strategy.resolve_params(params)
        except Exception as exc:
            self.errors[strategy.name] = str(exc)
            logger.error("tuner: strategy %s not applied in %s: %s", strategy.name, ctx.role.value, exc)

    def retire(self) -> None:
        """Undo this state's strategies and telemetry in this process (a new engine brings a new spec)."""
        self.switch({})
        self.probe.uninstall()
        offer_local_control(None)

    def context_for(self, strategy: Strategy) -> ProcessContext | None:
        return next((self.contexts[r] for r in Role if r in strategy.roles and r in self.contexts), None)

    def switch(self, wanted: StrategySet) -> None:
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

    def verify(self) -> None:
        """Check that every active strategy is still in force here; one that is not is no longer active."""
        for name in list(self.active):
            strategy = get_strategy(name)
            ctx = self.context_for(strategy)
            problem = strategy.verify(ctx) if ctx is not None else "no process context"
            if problem:
                self.errors[name] = problem
                del self.active[name]

    def report(self) -> ProcessReport:
        return {
            "pid": os.getpid(),
            "process_name": multiprocessing.current_process().name,
            "roles": sorted(role.value for role in self.contexts),
            "forked": self.forked,
            "active": dict(self.active),
            "errors": dict(self.errors),
            "counters": {name: dict(get_strategy(name).counters) for name in self.installable},
            "gc": self.probe.snapshot(),
            "vllm_env": {k: v for k, v in os.environ.items() if k.startswith("VLLM_")},
            "steps": self.steps.export() if Role.ENGINE_CORE in self.contexts else None,
            "arm_thresholds": dict(self.step_arms.thresholds),
            "arm_allocations": {arm: list(counts) for arm, counts in self.step_arms.allocations.items()},
        }

    def handle(self, request: ControlRequest) -> ProcessReport:
        """Serve one control request (:data:`~tuner.plugin.protocol.ControlRequest`)."""
        interleave = None
        if request["op"] == "switch":
            self.switch(request["strategies"])
        elif request["op"] == "telemetry":  # the observer-cost benchmark: the same engine with and without the timers
            self.telemetry = bool(request["enabled"])
            (self.probe.install if self.telemetry else self.probe.uninstall)()
        elif request["op"] == "interleave_start":
            self._interleave_start(request)
        elif request["op"] in {"interleave_drain", "interleave_stop"}:
            interleave = self._interleave_blocks(stop=request["op"] == "interleave_stop")
        elif request["op"] == "reset":
            self.probe.reset()
            self.steps.clear()
            for name in self.installable:
                get_strategy(name).counters.clear()
            self.verify()  # in force when the repetition starts ...
        elif request["op"] == "report":
            self.verify()  # ... and when it ends
        else:
            raise ValueError(f"unknown tuner control op {request['op']!r}")
        report = self.report()
        if interleave is not None:
            report["interleave"] = interleave
        return report

    def _interleave_start(self, request: InterleaveStart) -> None:
        """Every engine process holds both arms (a worker applies each batch's); EngineCore also times the blocks."""
        for name in {*request["a"], *request["b"]}:
            cls = get_strategy(name)
            if not cls.step_switchable:
                raise ValueError(f"{name} cannot be switched between engine steps ({cls.run_level_reason})")
        self.step_arms.start(request["a"], request["b"])
        if Role.ENGINE_CORE in self.contexts:
            engine_core = self.contexts[Role.ENGINE_CORE].owner
            self.interleaver.start(request, batch_queue=getattr(engine_core, "batch_queue", None) is not None)

    def _interleave_blocks(self, *, stop: bool) -> InterleaveBlocks | None:
        """The blocks EngineCore timed (None in a worker process); ``stop`` ends the comparison here."""
        if Role.ENGINE_CORE not in self.contexts:
            if stop:
                self.step_arms.stop()
            return None
        return self.interleaver.stop() if stop else self.interleaver.drain()


_state: ProcessState | None = None


def state() -> ProcessState | None:
    """This process's plugin state, or None when the plugin is not enabled here."""
    return _state


def register() -> None:
    """vLLM entry point (``vllm.general_plugins``): no-op without ``TUNER_PLUGIN`` or when its spec is in force.

    vLLM calls it once per process; a process that starts a second engine calls it again itself, and a changed
    spec then replaces the first engine's state (its strategies reverted) instead of being ignored.

    It never raises: vLLM calls plugins without a ``try``, so an exception here would stop every engine, a
    production ``vllm serve`` included. A failure is logged and reported as the ``plugin`` error of this
    process, and the tuner refuses to measure an engine whose processes report one.
    """
    try:
        _register()
    except Exception as exc:
        logger.error("tuner: the plugin failed to load (vLLM runs without it): %s: %s", type(exc).__name__, exc)
        if _state is not None:
            _state.errors[PLUGIN_ERROR] = f"the plugin failed to load: {type(exc).__name__}: {exc}"


def _register() -> None:
    global _state
    raw = os.environ.get(ENV_VAR)
    if not raw:
        return
    spec = decode_spec(raw)
    if _state is not None:
        if _state.spec == spec and _state.pid == os.getpid():
            return
        _state.retire()
    _state = ProcessState(spec)
    _copy_to_ray_actors()
    install_hooks(state)
    _state.install()
    offer_local_control(_state.handle)


def _after_fork_in_child() -> None:
    """A forked child (EngineCore, workers on a GPU) inherits the parent's plugin state but vLLM does not call
    :func:`register` again there: drop what belongs to the parent (its contexts, its applied strategies, its GC
    probe) and start this process's own state from the same spec."""
    global _state
    if _state is None or _state.pid == os.getpid():
        return
    inherited, _state = _state, None
    try:
        inherited.retire()
    except Exception as exc:
        logger.error("tuner: could not undo the parent's strategies after fork: %s", exc)
    register()
    if _state is not None:
        _state.forked = True


os.register_at_fork(after_in_child=_after_fork_in_child)


def _copy_to_ray_actors() -> None:
    """Ray workers and Ray data-parallel engines get only the driver's ``VLLM_*``-like variables and those listed
    in ``VLLM_RAY_EXTRA_ENV_VARS_TO_COPY``: add the plugin's spec there (before vLLM creates the actors)."""
    listed = [name.strip() for name in os.environ.get(RAY_COPY_VAR, "").split(",") if name.strip()]
    if ENV_VAR not in listed:
        os.environ[RAY_COPY_VAR] = ",".join([*listed, ENV_VAR])
