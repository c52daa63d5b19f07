"""The capacity record: what ``tuner capacity`` measured, and its one file.

``<output_dir>/<experiment>/capacity/capacity.json`` (schema ``tuner.capacity/1``), rewritten after every load level,
so that an interrupted search keeps what it measured. The fields are described in ``docs/records.md``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict, cast

from tuner.metrics import HostRecord
from tuner.records.files import read_schema_json, write_json
from tuner.records.json_values import JsonObject, StrategyParams
from tuner.records.upgrade import upgrade_capacity
from tuner.stats import AttainmentDifferenceRecord, CapacityEstimateRecord
from tuner.traffic import WorkloadRecord

CAPACITY_SCHEMA = "tuner.capacity/1"


ARMS = ("reference", "configuration")
"""The two arms of a capacity search, in the order a record keeps them."""


class ArmRecord(TypedDict):
    """What one arm runs: vLLM as installed with the experiment's engine (the reference), or a configuration: its
    strategies, and the engine arguments and vLLM variables it changes (an engine of its own: restart pairs)."""

    strategies: StrategyParams
    engine: JsonObject  # engine-arg overrides on top of the experiment's
    env: JsonObject  # vLLM environment variable overrides


class EngineRestart(TypedDict):
    """One engine start of a search by restart pairs (:mod:`tuner.capacity.restart`)."""

    arm: str
    tag: int  # the pass it ran (0: the ladder)
    start_s: float  # its start, warm-up included
    stop_s: float | None  # its stop; None while it runs


class UnpairedRuns(TypedDict):
    """Runs of one arm at a load of the restart pairs' ladder that never became a level (the budget or Ctrl-C stopped
    the search before the other arm's engine ran its rounds there): measured, so kept, and in no estimate."""

    load: float
    arm: str
    runs: list[dict[str, float]]  # per round, as a level's ``runs``


def restart_seconds(restart: EngineRestart) -> float:
    """What one engine start took of the budget: its start and its stop (none yet: 0)."""
    return restart["start_s"] + (restart["stop_s"] or 0.0)


CheckMetric = Literal["slo", "ttft_ms", "tpot_ms", "e2e_ms", "completed"]
"""What a check of a capacity search's SLO (:class:`tuner.capacity.slo.Check`) looks at: every ``measure.slo`` target,
one latency metric, or completion."""


LATENCY_NAMES = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_ms": "end-to-end latency"}
"""How a check's words name each latency metric."""


def targets_words(slo: dict[str, float | None]) -> str:
    """``TTFT <= 500 ms and TPOT <= 50 ms``: ``measure.slo``'s targets that are set."""
    return " and ".join(f"{LATENCY_NAMES[key]} <= {value:g} ms" for key, value in slo.items() if value is not None)


class CheckRecord(TypedDict):
    """A check (:class:`tuner.capacity.slo.Check`) as records keep it."""

    metric: CheckMetric
    limit_ms: float | None
    words: str


class TierRecord(TypedDict):
    """A tier as records keep it: its checks' shares and, once estimated, its capacities and ratio."""

    name: str
    words: str  # "95% of requests within TTFT <= 200 ms and at most 1% failed"
    shares: list[dict[str, float]]  # {check: index into the record's checks, least: share}
    estimate: CapacityEstimateRecord | None  # None before a level is measured


class LevelTierRecord(TypedDict):
    """At one load, the requests that passed every check of one tier: each arm's share and the paired difference."""

    attainment: dict[str, float]  # per arm ("reference", "configuration"): pooled over rounds
    rounds: dict[str, list[float]]  # per arm: the share in each round
    difference: AttainmentDifferenceRecord | None  # configuration - reference; None at 1 round


class LevelRecord(TypedDict):
    """One load level: both arms' rounds there and the paired attainment difference per request."""

    load: float
    offered_rps: float  # requests over the span of their send times at this load (inf: all sent at once)
    rounds: int
    passes: NotRequired[list[int]]  # each round's pass, in the order of ``runs``; absent before 2026-11-30
    requests: int  # per arm and round
    attainment: dict[str, float]  # per arm: the first tier's (every check of it passed), pooled over rounds
    difference: AttainmentDifferenceRecord | None  # the first tier's, configuration - reference; None at 1 round
    checks: list[dict[str, float]]  # per check of the record's checks, per arm: the share that passed it
    tiers: dict[str, LevelTierRecord]  # per tier: its checks together
    runs: dict[str, list[dict[str, float]]]  # per arm, per round: attainment, wall_s, host_busy, tree_cpus, position,
    # other_cpus (other processes' CPUs in use), pause_s (the run's longest pause), tool_wait, tool_gc_s
    set_aside: dict[str, list[dict[str, float]]]  # per arm, as runs: the rounds run again (other work took the host)


class AutoStart(TypedDict):
    """How ``capacity.start: auto`` placed the first probe (:func:`tuner.capacity.load.saturation_load`)."""

    load: float  # the workload's own load, whose send span was read
    span_s: float  # its requests' send span there
    all_at_once_s: float  # the reference serving every request sent at once
    predicted: float  # the load whose sends would span that time
    start: float  # the first load probed: predicted, within the load limits


class SearchRecord(TypedDict):
    """How the knee was searched and why it stopped."""

    knob: str  # speed, rate or concurrency (tuner.config.LoadKnob)
    unit: str
    start: float
    growth: float
    resolution: float
    rounds: int
    precision: float
    budget_s: float
    spent_s: float
    stop: (
        str | None
    )  # planned (the passes the precision needs), budget, max_rounds, censored, interrupted; None: running
    forecast: list[str]  # what the budget could resolve, said before the run and once the knee was bracketed
    contention: dict[str, float] | None  # capacity.contention (cpus): when a round was run again; None: never
    unloadable_from: float | None  # the load at which raising it no longer loaded the engine more (the search
    # probed no higher); None: none found
    start_auto: AutoStart | None  # how capacity.start: auto placed the first probe; None: not asked for
    oversaturated: dict[str, float]  # loads whose rounds stopped early, both arms over-saturated and missing every
    # tier: loads, rounds (not run) and saved_s (their expected engine seconds)
    restarts: list[EngineRestart] | None  # restart pairs: every engine start; None: the arms switched in place
    unpaired: list[UnpairedRuns] | None  # restart pairs: ladder runs no run of the other arm pairs; None: in place


class ContentionRecord(TypedDict):
    """The rounds run again after other work took the host (:mod:`tuner.capacity.contention`)."""

    rounds: int  # rounds kept, both arms
    rerun: int  # rounds set aside and run again
    contended: dict[str, int]  # per arm: set-aside rounds in which other processes took more CPUs from its run
    note: str | None  # what the summary says of them, None where no round was run again


class CapacityRecord(TypedDict):
    schema: str
    experiment: str
    created: str
    mode: str  # engine or serve
    vllm: str | None
    slo: dict[str, float | None]  # measure.slo: the per-request targets
    target: float  # the share of requests that must meet every target (of the first tier's first check)
    checks: list[CheckRecord]  # what each request passes or not (tuner.capacity.slo)
    tiers: list[TierRecord]  # the SLO tiers, each with its estimate; the first's is also ``estimate``
    reference: ArmRecord
    configuration: ArmRecord
    against: str | None  # the file the configuration came from (a sweep's winner.yaml), if any
    search: SearchRecord
    levels: list[LevelRecord]
    estimate: CapacityEstimateRecord | None  # the first tier's; None before a level
    summary: str  # the sentence the report and the CLI print (with the host's note, where it has one)
    workload: WorkloadRecord  # the workload record at the start load
    host: HostRecord | None  # the host's load over the runs (None: a search from before 2026-11-29)
    contention: ContentionRecord | None  # the rounds run again after other work took the host (None: before 2026-11-29)


def capacity_path(output_dir: Path, experiment: str) -> Path:
    return output_dir / experiment / "capacity" / "capacity.json"


def capacity_file(path: Path) -> Path | None:
    """The capacity record ``path`` names (the file, its ``capacity/`` directory or the experiment directory
    holding one but no sweep or run), None when it names none."""
    if path.is_file():
        return path if path.name == "capacity.json" else None
    for candidate in (path / "capacity.json", path / "capacity" / "capacity.json"):
        if candidate.is_file() and not (path / "sweep" / "summary.json").is_file():
            return candidate
    return None


def save_capacity(path: Path, record: CapacityRecord) -> Path:
    return write_json(path, record)


def load_capacity(path: Path) -> CapacityRecord:
    """The capacity record at ``path``; a file of another schema is refused, an older one gets its later fields
    empty (:func:`tuner.records.upgrade.upgrade_capacity`)."""
    record = read_schema_json(path, CAPACITY_SCHEMA, "capacity record")
    upgrade_capacity(record)
    if "tiers" not in record:
        _one_tier(record)
    return cast(CapacityRecord, record)


def _one_tier(record: dict[str, Any]) -> None:
    """A record from before tiers (2026-11-29) as the one tier it measured: ``measure.slo`` at ``target``, whose
    estimate, and each level's attainment and difference, are that tier's."""
    if "target" not in record:  # not a search's record: nothing measured to name
        record.update(checks=[], tiers=[])
        return
    words = targets_words(record.get("slo") or {})
    record["checks"] = [{"metric": "slo", "limit_ms": None, "words": words}]
    record["tiers"] = [
        {
            "name": "slo",
            "words": f"{100 * record['target']:.4g}% of requests within {words}",
            "shares": [{"check": 0, "least": record["target"]}],
            "estimate": record.get("estimate"),
        }
    ]
    for level in record.get("levels", []):
        level["checks"] = [dict(level["attainment"])]
        rounds = {arm: [run["attainment"] for run in runs] for arm, runs in level.get("runs", {}).items()}
        level["tiers"] = {
            "slo": {"attainment": level["attainment"], "rounds": rounds, "difference": level["difference"]}
        }


def level_rates(level: LevelRecord, arm: str, tier: str | None = None) -> tuple[float, float]:
    """(achieved, goodput) requests per second of ``arm`` at ``level``, a ratio of sums over the load's rounds: every
    request, then those passing every check of ``tier`` (default: the first), over the rounds' summed wall seconds.
    A round's wall runs from its first send to its last completion, so an arm that falls behind the offered load
    shows an achieved load below it."""
    runs = level["runs"][arm]
    wall = sum(r["wall_s"] for r in runs)
    if wall <= 0:
        return math.nan, math.nan
    share = level["tiers"][tier]["attainment"][arm] if tier is not None else level["attainment"][arm]
    requests = len(runs) * level["requests"]
    return requests / wall, share * requests / wall
