"""The calibration record: what ``tuner calibrate`` measured on a host, and its one file.

``<output_dir>/<experiment>/calibration/calibration.json`` (schema ``tuner.calibration/1``). ``tuner sweep`` reads
it to choose the block length of its step-level comparisons (:mod:`tuner.measure.grain`); a user reads it to learn what
a 1% effect costs on this host before spending engine time on a sweep.

Precision per method is expressed as *engine seconds per +-1%*: the engine time a paired comparison needs for its
95% CI of the ratio to be +-1% wide, (seconds per pair) x (1.96 x per-pair log SD / log 1.01)^2. Halving the
resolution quadruples it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal, NotRequired, TypedDict, cast

from tuner.records.files import read_schema_json, write_json

CALIBRATION_SCHEMA = "tuner.calibration/1"
Method = Literal["runs", "steps", "collector"]
Side = Literal["engine_core", "worker"]


class Precision(TypedDict):
    """One method's A/A noise: identical arms, compared as the sweep would ("collector": the collector factor of a
    GC-pacing comparison, from blocks of each arm alone, :mod:`tuner.measure.gc_pacing`)."""

    method: Method
    block_steps: int | None  # steps per block (None for run-level pairs)
    pairs: int
    elapsed_s: float
    log_sd: float  # per-pair SD of the log ratio (influence values of the ratio of sums)
    ratio: float | None  # the A/A estimate: 1 within its CI when calibrated
    ci: tuple[float, float] | None
    engine_s_per_pct: float
    guard_log_sd: NotRequired[float | None]  # steps by the body: the whole time's per-pair SD, its guard's noise
    # (absent in calibrations before 2026-11-29)


class Recovery(TypedDict):
    """A busy-wait of known size on one side of the pipeline, measured at step level."""

    side: Side
    delay_ms: float
    block_steps: int
    known: float  # 1 + delay / the delayed arm's mean comparable step time (the step-time ratio)
    ratio: float | None
    ci: tuple[float, float] | None  # 95%
    ci_strict: tuple[float, float] | None  # 99.9%: what ``covered`` is judged on
    covered: bool


class GcRate(TypedDict):
    """How often the engine processes collected during the step-level A/A, and how much of a step's time."""

    steps: int
    gen0_collections: int  # the most of any engine process
    steps_per_gen0: float | None  # None: no collection at all
    gc_share: float  # the largest share of wall time any engine process spent collecting
    share_of_mutator: float | None  # GC on the steps' critical path per mutator second, vLLM as installed alone


class Calibration(TypedDict):
    schema: str
    experiment: str
    created: str
    vllm: str | None
    topology: dict[str, str]  # executor, scheduling, model runner: what the figures hold for
    precision: list[Precision]
    recommended_block_steps: int
    recovery: list[Recovery]
    gc: GcRate
    strategies: dict[str, str]  # name -> "active (counters moved)" or why not on this path
    elapsed_s: float


def engine_s_per_pct(seconds_per_pair: float, log_sd: float) -> float:
    """Engine seconds for a 95% CI of +-1% (see the module docstring); inf when nothing was measured."""
    if not (seconds_per_pair > 0 and math.isfinite(log_sd)):
        return math.inf
    return seconds_per_pair * (1.96 * log_sd / math.log(1.01)) ** 2


def calibration_path(output_dir: Path, experiment: str) -> Path:
    return output_dir / experiment / "calibration" / "calibration.json"


def save_calibration(path: Path, record: Calibration) -> Path:
    return write_json(path, record)


def load_calibration(path: Path) -> Calibration | None:
    """The calibration at ``path`` (None when there is none); a file of another schema is refused."""
    if not path.is_file():
        return None
    data = read_schema_json(path, CALIBRATION_SCHEMA, "calibration", ": run `tuner calibrate` again")
    return cast(Calibration, data)


def best(record: Calibration, method: Method) -> Precision | None:
    """The method's cheapest calibrated precision: steps at the recommended block length, or run-level pairs."""
    for p in record["precision"]:
        if p["method"] == method and (method == "runs" or p["block_steps"] == record["recommended_block_steps"]):
            return p
    return None


def cost_line(record: Calibration) -> str:
    """What a 1% effect costs on this host: the sentence the calibration and the sweep's power statement print."""
    steps, runs = best(record, "steps"), best(record, "runs")
    if steps is None or not math.isfinite(steps["engine_s_per_pct"]):
        return "a +-1% CI: not measurable at step level here (see the calibration report)"
    line = (
        f"a +-1% CI (a 1% effect detected at 95%) costs ~{steps['engine_s_per_pct']:.0f} engine-seconds here at "
        f"{record['recommended_block_steps']}-step blocks"
    )
    if runs is not None and math.isfinite(runs["engine_s_per_pct"]):
        ratio = runs["engine_s_per_pct"] / max(steps["engine_s_per_pct"], 1e-9)
        line += f"; run-level pairs would need ~{runs['engine_s_per_pct']:.0f} s ({ratio:.0f}x)"
    return line
