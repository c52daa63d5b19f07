"""What the tuner and its plugin inside vLLM's processes agree on: the only plugin module the tuner side imports.

The tuner hands the plugin a spec through an environment variable (:data:`ENV_VAR`, made by :func:`encode_spec`),
reaches every process with control requests (:data:`CONTROL_METHOD`, :func:`control_every_engine`) and gets one
:class:`ProcessReport` per process back. Importing it loads neither vLLM nor the plugin's hooks, so the tuner side
never runs plugin code by accident.

It is plain data and small functions but for one piece of state: a front-end that vLLM runs inside the tuner
(offline and streaming modes) shares its process with the plugin. The tuner loads the plugin there as vLLM does,
through its entry point (:func:`load_plugin_here`), and the plugin registers that process's control handler, a
process-global (:func:`offer_local_control`), which :func:`local_control` calls.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Literal, NotRequired, TypedDict, cast

ENV_VAR = "TUNER_PLUGIN"
"""Holds the JSON spec in every vLLM process: ``{"strategies": {...}, "install": [...], "control": {...}}``."""
CONTROL_METHOD = "tuner_control"
"""The EngineCore utility method and worker RPC that serve control requests: ``{"op": ...}`` with ``report``
(telemetry since the last ``reset``), ``reset``, ``switch`` (to ``strategies``), ``telemetry`` (GC timers on or
off: ``enabled``) or ``interleave_start`` (an :class:`InterleaveStart`) / ``interleave_drain`` /
``interleave_stop`` (step-level A/B blocks: EngineCore times them, every engine process applies each batch's
arm)."""
PLUGIN_ERROR = "plugin"
"""The key of the plugin's own failure in a report's ``errors``: the tuner refuses to measure such an engine."""
ENTRY_POINT_GROUP = "vllm.general_plugins"
ENTRY_POINT_NAME = "tuner"

# Upper bucket edges of the GC pause histogram, in milliseconds (the last bucket is open-ended).
PAUSE_EDGES_MS = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0)
HIDDEN_TAG = 4  # a pause interval's tag: generation + HIDDEN_TAG when the pause was hidden
PAUSE_KINDS = ("critical", "hidden")  # "overran": the hidden pauses after which the wait returned at once


def pause_tag(generation: int, hidden: bool) -> int:
    """The tag of a GC pause interval: its generation, plus :data:`HIDDEN_TAG` when it was hidden."""
    return generation + (HIDDEN_TAG if hidden else 0)


def tag_generation(tag: int) -> int:
    return tag % HIDDEN_TAG


def tag_hidden(tag: int) -> bool:
    return tag >= HIDDEN_TAG


class Intervals(TypedDict):
    """A ring of time intervals (``time.monotonic``), oldest first; ``dropped`` were overwritten."""

    start: list[float]
    end: list[float]
    tag: list[int]
    dropped: int


class PauseClassSnapshot(TypedDict):
    """Collections of one class (critical, hidden or overran), per generation."""

    collections: list[int]
    seconds: list[float]
    max_pause_ms: list[float]
    total_s: float
    share: float


class PauseHistogram(TypedDict):
    edges_ms: list[float]
    counts: list[int]


class GcSnapshot(TypedDict):
    """One process's GC telemetry and memory for the window since the last ``reset``."""

    window_s: float
    collections: list[int]
    gc_seconds: list[float]
    gc_total_s: float
    gc_share: float
    max_pause_ms: float
    collected_objects: int
    critical: PauseClassSnapshot
    hidden: PauseClassSnapshot
    overran: PauseClassSnapshot
    gc_critical_share: float
    critical_max_pause_ms: float
    pauses: NotRequired[Intervals]  # joined with request timings by the tuner, not kept in run.json
    pause_histogram: PauseHistogram
    threshold: list[int]
    freeze_count: int
    tracked_objects: int | None
    rss_bytes: int
    peak_rss_bytes: int
    peak_rss_scope: Literal["window", "lifetime"]


StrategySet = dict[str, dict[str, Any]]
"""Strategy name -> its parameters: what a process applies (an arm of a comparison, a trial's set)."""
Arm = Literal["A", "B"]


class InterleaveStart(TypedDict):
    """Start a step-level comparison: every engine process receives both arms; EngineCore alternates them.

    Blocks of ``block_steps`` model-executing steps come in pairs, each pair in a random order (``seed``).
    """

    op: Literal["interleave_start"]
    a: StrategySet
    b: StrategySet
    block_steps: int
    seed: int


def interleave_start(a: StrategySet, b: StrategySet, *, block_steps: int, seed: int) -> InterleaveStart:
    return {"op": "interleave_start", "a": a, "b": b, "block_steps": block_steps, "seed": seed}


class SwitchRequest(TypedDict):
    """Put ``strategies`` in force (every other installable strategy out of force)."""

    op: Literal["switch"]
    strategies: StrategySet


class TelemetryRequest(TypedDict):
    """Install or remove the GC timers (the observer-cost benchmark)."""

    op: Literal["telemetry"]
    enabled: bool


class PlainRequest(TypedDict):
    """``report`` (telemetry and counters since the last ``reset``), ``reset``, and the step-level comparison's
    ``interleave_drain`` (blocks timed so far) and ``interleave_stop``."""

    op: Literal["report", "reset", "interleave_drain", "interleave_stop"]


ControlRequest = SwitchRequest | TelemetryRequest | PlainRequest | InterleaveStart
"""Every control request the tuner sends to a process (each process answers with its :class:`ProcessReport`)."""

REPORT: PlainRequest = {"op": "report"}
RESET: PlainRequest = {"op": "reset"}
INTERLEAVE_DRAIN: PlainRequest = {"op": "interleave_drain"}
INTERLEAVE_STOP: PlainRequest = {"op": "interleave_stop"}


def switch_request(strategies: StrategySet) -> SwitchRequest:
    return {"op": "switch", "strategies": strategies}


CONTROL_OPS = ("switch", "telemetry", "report", "reset", "interleave_start", "interleave_drain", "interleave_stop")


def as_control_request(data: object) -> ControlRequest:
    """A control request that arrived as JSON (serve mode's endpoint): a JSON object with a known ``op``."""
    if not isinstance(data, dict):
        raise ValueError("a control request is a JSON object")
    if data.get("op") not in CONTROL_OPS:
        raise ValueError(f"unknown tuner control op {data.get('op')!r}")
    return cast(ControlRequest, data)


STEP_TAG_ATTRIBUTE = "_tuner_step"
"""The attribute of a ``SchedulerOutput`` that carries its :class:`StepTag` to every process executing it."""


@dataclass(frozen=True, slots=True)
class StepTag:
    """What EngineCore's interleaver attaches to each scheduled batch of a step-level comparison.

    It travels with the ``SchedulerOutput`` (in-process under the ``uni`` executor, pickled to each worker under
    ``mp``), so every process applies the batch's own arm before it works on the batch.
    """

    arm: Arm


class BlockRecord(TypedDict):
    """One block of a step-level comparison, as EngineCore timed it.

    Per counted step (one that scheduled tokens): its start on ``time.monotonic`` (the clock every process of the
    host shares, so a worker's GC pauses can be placed inside it), wall seconds of the engine step, running requests
    at its start, scheduled tokens and EngineCore's process's GC seconds on the critical path inside it (its
    critical pauses; one hidden at a wait point delayed nothing); per block, EngineCore's process's net GC-tracked
    allocations from its first step's start to its last's end (what paces its collections). The first ``washout``
    steps ran under the block's arm but are not compared: with a batch queue (async scheduling) each engine step
    also finishes the batch scheduled one step earlier, which at a block's start belongs to the other arm.
    """

    pair: int
    arm: Arm
    t0: list[float]
    dt: list[float]
    running: list[int]
    tokens: list[int]
    gc_s: list[float]
    allocated: int
    washout: int


class InterleaveBlocks(TypedDict):
    """The answer to ``interleave_drain`` / ``interleave_stop``: complete pairs of blocks."""

    blocks: list[BlockRecord]
    block_steps: int


class _ProcessReportBase(TypedDict):
    pid: int
    process_name: str
    roles: list[str]
    forked: bool
    active: dict[str, dict[str, Any]]
    errors: dict[str, str]
    counters: dict[str, dict[str, int]]
    gc: GcSnapshot
    vllm_env: NotRequired[dict[str, str]]  # the process's VLLM_* environment variables, as it runs with them
    steps: NotRequired[Intervals | None]  # joined with request timings by the tuner, not kept in run.json


class ProcessReport(_ProcessReportBase, total=False):
    """One vLLM process's answer to a control request: roles, strategies in force, errors, counters, telemetry.

    ``steps`` (EngineCore only) are the engine steps (tag: scheduled tokens); ``interleave`` answers
    ``interleave_drain`` / ``interleave_stop`` (EngineCore only; None elsewhere); ``arm_thresholds`` are what each arm
    of the last step comparison set the collector's thresholds to in this process (what paces its collections), and
    ``arm_allocations`` how many GC-tracked objects (net) this process allocated while each arm was in force, and in
    how many batches.
    """

    interleave: InterleaveBlocks | None
    arm_thresholds: dict[str, list[int]]  # the GC thresholds each arm of the last step comparison put in force here
    arm_allocations: dict[str, list[int]]  # per arm of it: net GC-tracked allocations here, and batches executed


class ControlEndpointSpec(TypedDict):
    """Where serve mode's front-end publishes its loopback control endpoint, and the token callers must show."""

    token: str
    port_file: str


class PluginSpec(TypedDict):
    """The plugin's instructions in :data:`ENV_VAR`: strategies in force at start, and every one it may switch to."""

    strategies: StrategySet
    install: list[str]
    control: NotRequired[ControlEndpointSpec]  # serve mode only


def encode_spec(
    strategies: StrategySet, install: list[str] | None = None, control: ControlEndpointSpec | None = None
) -> str:
    """The :data:`ENV_VAR` value that applies ``strategies`` and can later switch to any of ``install``."""
    spec: PluginSpec = {"strategies": strategies, "install": sorted(set(strategies) | set(install or ()))}
    if control is not None:
        spec["control"] = control
    return json.dumps(spec, sort_keys=True)


def decode_spec(raw: str) -> PluginSpec:
    """A :data:`ENV_VAR` value back as a spec; :class:`ValueError` saying what is wrong with it."""
    try:
        spec = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{ENV_VAR} is not valid JSON: {exc}") from None
    if not isinstance(spec, dict):
        raise ValueError(f"{ENV_VAR} must be a JSON object, got {type(spec).__name__}")
    strategies = spec.get("strategies", {})
    install = spec.get("install", [])
    if not isinstance(strategies, dict) or not all(isinstance(v, dict) for v in strategies.values()):
        raise ValueError(f"{ENV_VAR}: strategies must map each name to its parameters")
    if not isinstance(install, list) or not all(isinstance(name, str) for name in install):
        raise ValueError(f"{ENV_VAR}: install must be a list of strategy names")
    decoded: PluginSpec = {"strategies": strategies, "install": install}
    if "control" in spec:
        decoded["control"] = spec["control"]
    return decoded


async def control_every_engine(core_client: Any, request: ControlRequest) -> list[ProcessReport]:
    """:data:`CONTROL_METHOD` on every EngineCore an async client manages, their reports concatenated.

    With data parallelism vLLM's client sends a utility call to every engine but returns only engine 0's answer
    (``DPLBAsyncMPClient.call_utility_async``), so telemetry and the activity check would see one rank: each
    engine is asked on its own here.
    """
    engines = list(getattr(core_client, "core_engines", None) or [])
    call_one = getattr(core_client, "_call_utility_async", None)
    if len(engines) > 1 and call_one is not None:
        answers = await asyncio.gather(*(call_one(CONTROL_METHOD, request, engine=e) for e in engines))
        return [report for answer in answers for report in answer]
    return list(await core_client.call_utility_async(CONTROL_METHOD, request))


_local_handler: Callable[[ControlRequest], ProcessReport] | None = None


def offer_local_control(handler: Callable[[ControlRequest], ProcessReport] | None) -> None:
    """Called by the plugin in each process it runs in: ``handler`` answers control requests there."""
    global _local_handler
    _local_handler = handler


def local_control(request: ControlRequest) -> ProcessReport | None:
    """This process's report when the plugin runs here (a front-end inside the tuner), else None."""
    return _local_handler(request) if _local_handler is not None else None


def load_plugin_here() -> None:
    """Load the plugin in this process as vLLM does, through its entry point, with the spec now in
    :data:`ENV_VAR`. vLLM loads plugins once per process; a second engine here brings its own spec, so the tuner
    calls this before each engine whose front-end runs in its own process."""
    found = entry_points(group=ENTRY_POINT_GROUP, name=ENTRY_POINT_NAME)
    if not found:
        raise RuntimeError(
            f"the {ENTRY_POINT_GROUP} entry point {ENTRY_POINT_NAME!r} is not installed: install this package "
            "(pip install -e .) so that vLLM's processes load the tuner plugin"
        )
    next(iter(found)).load()()
