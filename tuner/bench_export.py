"""``tuner export bench``: results as input for benchmark-action/github-action-benchmark.

The action's custom tools read a JSON list of entries::

    [{"name": str, "unit": str, "value": number, "range": str (optional), "extra": str (optional)}, ...]

``customBiggerIsBetter`` gets the throughput metrics (``requests_per_s``, ``output_tokens_per_s``,
``total_tokens_per_s``; units ``req/s``, ``tok/s``) and ratios where higher is better; ``customSmallerIsBetter``
gets the latency percentiles (``{ttft,tpot,itl,e2e}_{p50,p90,p99}_ms``, unit ``ms``) and ratios where lower is
better. Entry names are ``<prefix>/<config>/<metric>`` (the prefix defaults to the experiment name) and stay
stable from commit to commit, since the action draws one chart per name.

What is exported:

- a run: the median over its repetitions of every metric (config ``run``); ``range`` is ``± sd`` over the
  repetitions;
- a sweep: the baseline trial (config ``baseline``: vLLM as installed, the number that tracks vLLM itself),
  the best trial (config ``best``: the significant winner, else the top first-objective ratio, its verdict in
  ``extra``) and, for the objectives and constraints, the best trial's paired ratio to the baseline (config
  ``best-vs-baseline``, unit ``x``) with its 95% CI in ``range`` (e.g. ``1.02-1.08x (95% CI)``).

``extra`` is human-readable context: the configuration (strategies, engine overrides), the vLLM version, the
device, the git revision and the number of repetitions. :data:`BENCH_ENTRY_SCHEMA` is the JSON Schema of one
file; :func:`validate` checks a list against it without third-party packages.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any, Literal

from tuner.errors import UserError
from tuner.metrics import HIGHER_IS_BETTER, LATENCY_FAMILIES
from tuner.report import (
    Loaded,
    baseline_trial,
    describe_engine,
    describe_strategies,
    load,
    metric_unit,
    pick_best,
    ratio_metrics,
    run_reps,
    trial_metric,
    trial_reps,
    vllm_version,
)
from tuner.results import write_json

BenchKind = Literal["bigger", "smaller"]
KINDS: tuple[BenchKind, ...] = ("bigger", "smaller")
TOOLS: dict[BenchKind, str] = {"bigger": "customBiggerIsBetter", "smaller": "customSmallerIsBetter"}
THROUGHPUT = sorted(HIGHER_IS_BETTER)
LATENCY = [f"{family}_{pct}_ms" for family in LATENCY_FAMILIES for pct in ("p50", "p90", "p99")]
METRICS: dict[BenchKind, list[str]] = {"bigger": THROUGHPUT, "smaller": LATENCY}
Entries = dict[BenchKind, list[dict[str, Any]]]

BENCH_ENTRY_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "github-action-benchmark custom tool input (customBiggerIsBetter / customSmallerIsBetter)",
    "type": "array",
    "items": {
        "type": "object",
        "required": ["name", "unit", "value"],
        "additionalProperties": False,
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "unit": {"type": "string", "minLength": 1},
            "value": {"type": "number"},
            "range": {"type": "string"},
            "extra": {"type": "string"},
        },
    },
}


def validate(entries: Any) -> list[str]:
    """Problems with ``entries`` against :data:`BENCH_ENTRY_SCHEMA` (plus unique names, finite values)."""
    if not isinstance(entries, list):
        return ["top level: expected a list"]
    problems = []
    allowed = set(BENCH_ENTRY_SCHEMA["items"]["properties"])
    names: set[str] = set()
    for i, entry in enumerate(entries):
        where = f"[{i}]"
        if not isinstance(entry, dict):
            problems.append(f"{where}: expected an object")
            continue
        for key in ("name", "unit", "value"):
            if key not in entry:
                problems.append(f"{where}: missing {key!r}")
        for key in set(entry) - allowed:
            problems.append(f"{where}: unexpected key {key!r}")
        for key in ("name", "unit", "range", "extra"):
            if key in entry and not isinstance(entry[key], str):
                problems.append(f"{where}.{key}: expected a string")
        for key in ("name", "unit"):
            if isinstance(entry.get(key), str) and not entry[key]:
                problems.append(f"{where}.{key}: empty")
        value = entry.get("value")
        if "value" in entry and (isinstance(value, bool) or not isinstance(value, (int, float))):
            problems.append(f"{where}.value: expected a number")
        elif isinstance(value, float) and not math.isfinite(value):
            problems.append(f"{where}.value: not finite")
        name = entry.get("name")
        if isinstance(name, str):
            if name in names:
                problems.append(f"{where}.name: duplicate {name!r}")
            names.add(name)
    return problems


def _context(data: dict[str, Any], strategies: dict[str, Any], engine: dict[str, Any], n: int, more: str = "") -> str:
    env = data.get("environment") or {}
    lines = [
        f"strategies: {describe_strategies(strategies)}",
        *([f"engine: {describe_engine(engine)}"] if engine else []),
        f"vllm: {vllm_version(env)}",
        f"device: {env.get('device', '?')}",
        f"git: {(env.get('git_sha') or '?')[:12]}",
        f"repetitions: {n}" if n else "repetitions: not kept",
    ]
    if more:
        lines.append(more)
    return "\n".join(lines)


def _spread(values: list[float]) -> str | None:
    return f"± {statistics.stdev(values):.4g}" if len(values) >= 2 else None


def _entry(name: str, unit: str, value: float, spread: str | None, extra: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "unit": unit, "value": round(float(value), 6)}
    if spread:
        entry["range"] = spread
    entry["extra"] = extra
    return entry


def _absolute(
    prefix: str, config: str, reps: list[dict[str, float]], medians: dict[str, float | None], extra: str
) -> Entries:
    out: Entries = {k: [] for k in KINDS}
    for kind in KINDS:
        for metric in METRICS[kind]:
            value = medians.get(metric)
            if value is None or not math.isfinite(value):
                continue
            values = [r[metric] for r in reps if metric in r]
            out[kind].append(_entry(f"{prefix}/{config}/{metric}", metric_unit(metric), value, _spread(values), extra))
    return out


def bench_entries(loaded: Loaded, prefix: str | None = None) -> Entries:
    """Both entry lists for a loaded run or sweep."""
    data = loaded.data
    prefix = prefix or str(data.get("experiment") or "tuner")
    if loaded.kind == "run":
        reps = run_reps(data)
        medians: dict[str, float | None] = {
            m: statistics.median([r[m] for r in reps if m in r]) if any(m in r for r in reps) else None
            for m in THROUGHPUT + LATENCY
        }
        engine = (data.get("config") or {}).get("engine") or {}
        return _absolute(prefix, "run", reps, medians, _context(data, data.get("strategies") or {}, engine, len(reps)))

    out: Entries = {k: [] for k in KINDS}
    base = baseline_trial(data)
    if base is not None and base["state"] == "COMPLETE":
        reps = trial_reps(base)
        medians = {m: trial_metric(base, m) for m in THROUGHPUT + LATENCY}
        extra = _context(data, {}, base.get("engine") or {}, len(reps), "config: baseline (vLLM as installed)")
        for kind, entries in _absolute(prefix, "baseline", reps, medians, extra).items():
            out[kind] += entries
    best, why = pick_best(data)
    if best is None:
        return out
    reps = trial_reps(best)
    first = data["objectives"][0]["metric"]
    first_ratio = (best.get("ratios") or {}).get(first) or {}
    verdict = f"trial #{best['number']}: {why}; verdict on {first}: {best.get('verdict') or '-'}"
    if first_ratio.get("p_value") is not None:
        verdict += f" (p = {first_ratio['p_value']:.3g})"
    extra = _context(data, best.get("strategies") or {}, best.get("engine") or {}, len(reps), verdict)
    medians = {m: trial_metric(best, m) for m in THROUGHPUT + LATENCY}
    for kind, entries in _absolute(prefix, "best", reps, medians, extra).items():
        out[kind] += entries
    for metric in ratio_metrics(data):
        ratio = (best.get("ratios") or {}).get(metric) or {}
        if ratio.get("ratio") is None:
            continue
        ci = (
            f"{ratio['ci_low']:.3f}-{ratio['ci_high']:.3f}x (95% CI)"
            if ratio.get("ci_low") is not None and ratio.get("ci_high") is not None
            else None
        )
        more = f"{verdict}\nratio verdict: {ratio.get('verdict') or '-'}, paired over {ratio.get('n', '?')} pairs"
        out["bigger" if metric in HIGHER_IS_BETTER else "smaller"].append(
            _entry(
                f"{prefix}/best-vs-baseline/{metric}",
                "x",
                float(ratio["ratio"]),
                ci,
                _context(data, best.get("strategies") or {}, best.get("engine") or {}, len(reps), more),
            )
        )
    return out


def export_bench(path: Path, out: Path, *, kind: BenchKind | None = None, prefix: str | None = None) -> list[Path]:
    """Write one file (``kind`` given) or two (``<stem>-bigger<suffix>`` and ``<stem>-smaller<suffix>``)."""
    loaded = load(path)
    entries = bench_entries(loaded, prefix)
    targets: list[tuple[BenchKind, Path]] = (
        [(kind, out)]
        if kind is not None
        else [(k, out.with_name(f"{out.stem}-{k}{out.suffix or '.json'}")) for k in KINDS]
    )
    written = []
    for which, target in targets:
        problems = validate(entries[which])
        if problems:  # a bug here, not bad input: never hand the action a file it would misread
            raise RuntimeError("invalid benchmark entries: " + "; ".join(problems))
        if not entries[which]:
            raise UserError.single(str(loaded.path), f"nothing to export for {TOOLS[which]}: no completed measurements")
        written.append(write_json(target, entries[which]))
    return written
