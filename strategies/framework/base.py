"""The contract every strategy implements.

A strategy changes vLLM's host-side behaviour inside the processes it names (front-end, EngineCore,
workers). It is loaded in each of those processes by the tuner's ``vllm.general_plugins`` entry point
(:mod:`tuner.plugin`), which calls, in this order:

1. :meth:`Strategy.install` once per process at plugin load: class-level patches, idempotent;
2. :meth:`Strategy.apply` when a process of one of its roles is ready (engine built, worker warmed up);
3. :meth:`Strategy.revert` when a running engine switches to a set without it (switchable strategies only).

Strategies and the plugin's hooks (:mod:`tuner.plugin.hooks`) are the code that knows vLLM internals; the tuner side
reaches them only through :mod:`tuner.plugin.protocol`, and both declare the vLLM source they need
(:mod:`strategies.framework.requirements`, :mod:`tuner.plugin.hook_requirements`).
"""

from __future__ import annotations

import enum
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import cache
from typing import Any, ClassVar, Literal

from packaging.version import Version

from strategies.framework.requirements import Requirement, unmet
from strategies.framework.source_tree import admits, forget_sources, installed_root, source_version


class Role(enum.StrEnum):
    """Which vLLM process a piece of code runs in."""

    FRONTEND = "frontend"  # process 0: the `LLM`/`AsyncLLM` owner or the API server
    ENGINE_CORE = "engine_core"  # scheduler, KV-cache manager, executor
    WORKER = "worker"  # model runner and sampler (inside EngineCore under the uni executor)


ALL_ROLES = frozenset(Role)


@dataclass(frozen=True)
class Param:
    """One typed, bounded parameter of a strategy: every value an experiment gives it (fixed, or each choice and bound
    of its search range) is checked against it before an engine starts; ``tuner strategies list`` shows it."""

    name: str
    kind: Literal["bool", "int", "float"]
    default: bool | int | float | None
    low: float | None = None
    high: float | None = None
    log: bool = False
    help: str = ""

    def validate(self, value: Any) -> bool | int | float | None:
        """Return ``value`` checked against the type and range, or raise ``ValueError``."""
        if value is None and self.default is None:
            return None
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise ValueError(f"{self.name} must be true or false, got {value!r}")
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{self.name} must be a number, got {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{self.name} must be a finite number, got {value!r}")
        if self.kind == "int" and isinstance(value, float) and not value.is_integer():
            raise ValueError(f"{self.name} must be an integer, got {value!r}")
        if self.low is not None and value < self.low:
            raise ValueError(f"{self.name} must be >= {self.low:g}, got {value!r}")
        if self.high is not None and value > self.high:
            raise ValueError(f"{self.name} must be <= {self.high:g}, got {value!r}")
        return int(value) if self.kind == "int" else float(value)


@dataclass(frozen=True)
class Upstream:
    """Where vLLM itself stands on what a strategy changes: its default since ``default_since`` ("" for every
    release this tool supports, None for never), with the PRs and limits in ``note``. Where vLLM already does it,
    the strategy's ``false`` arm is the experiment: it measures what vLLM's default is worth."""

    default_since: str | None
    note: str = ""

    def status(self, installed: Version | None) -> str:
        """One line for ``tuner strategies list`` and the reports, for the installed release (None: unknown)."""
        note = f" ({self.note})" if self.note else ""
        if self.default_since is None:
            return f"not in vLLM{note}"
        if self.default_since == "":
            return f"vLLM default in every supported release{note}: the `false` arm measures its worth"
        if installed is not None and not admits(f">={self.default_since}", installed):
            return f"not in vLLM {installed} (its default since {self.default_since}){note}"
        return f"vLLM default since {self.default_since}{note}: the `false` arm measures its worth"


@dataclass(frozen=True)
class Applicability:
    """Whether a strategy can work on the installed vLLM, and why not when it cannot."""

    ok: bool
    reason: str = ""


@dataclass
class ProcessContext:
    """What a strategy may look at in the process it is applied in."""

    role: Role
    vllm_config: Any = None  # vllm.config.VllmConfig once the process is ready
    owner: Any = None  # the EngineCore, Worker or front-end engine object that became ready
    counters: dict[str, int] = field(default_factory=dict)


@cache
def _source_check(requires: tuple[Requirement, ...], vllm_versions: str) -> Applicability:
    """The installed vLLM against a strategy's declarations; the verdict is kept, the parsed sources are not."""
    if not requires and not vllm_versions:
        return Applicability(True)
    root = installed_root()
    if root is None:
        return Applicability(False, "vLLM is not installed")
    version = source_version(root)
    if vllm_versions and (version is None or not admits(vllm_versions, version)):
        release = f"vLLM {version}" if version else "a vLLM without vllm/_version.py"
        return Applicability(False, f"{release} is outside the releases it supports ({vllm_versions})")
    try:
        problems = unmet(requires, root)
    finally:
        forget_sources()
    return Applicability(not problems, problems[0] if problems else "")


class Strategy(ABC):
    """Base class of host-side performance strategies.

    Subclasses set the class attributes and implement :meth:`apply`/:meth:`revert`. One instance lives
    in each process; per-process state (saved thresholds, flags read by patches) lives on it.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    params: ClassVar[tuple[Param, ...]] = ()
    roles: ClassVar[frozenset[Role]] = ALL_ROLES
    switchable: ClassVar[bool] = True
    """Whether it can be applied/reverted on a running engine between runs."""
    step_switchable: ClassVar[bool] = False
    """Whether it can be switched between two engine steps (in-engine A/B blocks): its :meth:`apply` and
    :meth:`revert` are cheap, and what it changes acts on the step in progress in the process that applies it.
    The plugin does the switching: every process that executes a batch applies the batch's arm first (EngineCore,
    each worker), so a strategy need not know about steps. Its effect on the front-end, which steps do not
    include, is measured by run-level pairs."""
    paces_gc: ClassVar[bool] = False
    """Whether it changes *when* the collector runs (thresholds, collection points). Garbage outlives a step: at
    blocks shorter than a collection cycle the arm with the lower threshold would collect the other arm's garbage,
    so such a strategy is compared in blocks of several cycles, each ending in a settle
    (see :mod:`tuner.measure.grain`).
    A strategy that only changes how much garbage a step makes needs neither: a collection then falls in each arm's
    steps in proportion to the garbage they make."""
    run_level_reason: ClassVar[str] = "it does not declare itself step-switchable (Strategy.step_switchable)"
    """Why it is compared only between runs (shown by ``tuner strategies list``) when not step-switchable."""
    requires: ClassVar[tuple[Requirement, ...]] = ()
    """What its patches need from vLLM's source (checked statically, here and per release in the test suite)."""
    vllm_versions: ClassVar[str] = ""
    """PEP 440 specifier of the vLLM releases it supports ("" for any)."""
    upstream: ClassVar[Upstream] = Upstream(None)
    """What vLLM itself does about it (:meth:`Upstream.status`)."""
    paths: ClassVar[str] = ""
    """On which code paths it acts (model runner V1/V2, sync/async scheduling, executor) and why not elsewhere."""

    def __init__(self) -> None:
        self.counters: dict[str, int] = {}

    def applicable(self) -> Applicability:
        """Check the installed vLLM against :attr:`vllm_versions` and :attr:`requires` before any engine starts,
        without importing it (extend to check the environment)."""
        return _source_check(self.requires, self.vllm_versions)

    def refuses(self, vllm_config: Any) -> str | None:
        """Why the strategy cannot act on the code path of an engine with this resolved ``VllmConfig`` (model
        runner V1/V2, async scheduling, executor, start method, parallelism, speculative decoding), or None.

        The tuner asks before any engine starts, and the plugin again when a process is ready, so a strategy that
        would silently do nothing is refused before anything is measured.
        """
        return None

    def install(self) -> None:  # noqa: B027 - optional hook
        """Install class-level patches once per process (must be idempotent)."""

    @abstractmethod
    def apply(self, ctx: ProcessContext, params: dict[str, Any]) -> None:
        """Turn the strategy on in this process with validated ``params``."""

    @abstractmethod
    def revert(self, ctx: ProcessContext) -> None:
        """Restore this process to vLLM's native behaviour."""

    def count(self, key: str, n: int = 1) -> None:
        """Count how often a patched path ran: the proof that the strategy is really active.

        The tuner requires a counter of every active strategy to move during each measured repetition in every
        process where it is applied; a strategy that changes state once (not a code path) counts in :meth:`verify`.
        """
        self.counters[key] = self.counters.get(key, 0) + n

    def verify(self, ctx: ProcessContext) -> str | None:
        """Called at the start and end of each measured repetition while active: why the strategy is no longer in
        force here (None when it is). Strategies that set process state once check it and count ``in_force``."""
        return None

    @classmethod
    def resolve_params(cls, given: dict[str, Any] | None) -> dict[str, Any]:
        """Fill defaults and validate ``given``; raise ``ValueError`` naming the bad parameter."""
        given = dict(given or {})
        known = {p.name: p for p in cls.params}
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise ValueError(
                f"strategy {cls.name!r} has no parameter {', '.join(unknown)} (known: {', '.join(known) or 'none'})"
            )
        return {name: p.validate(given.get(name, p.default)) for name, p in known.items()}
