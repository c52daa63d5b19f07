"""The capacity search's report: ``report.md``, ``report.html`` and ``attainment.png`` beside ``capacity.json``."""

from __future__ import annotations

import math
from pathlib import Path

from matplotlib import ticker

from tuner.records import ARMS, CapacityRecord, level_rates, write_text
from tuner.report.document import Doc
from tuner.report.figures import SERIES_COLORS, new_figure, save_figure
from tuner.stats import arm_attainment

ARM_LABELS = {"reference": "reference (vLLM as installed)", "configuration": "configuration"}


def _pct(value: float | None) -> str:
    return "open" if value is None else f"{100 * value:.2f}%"


def _signed(value: float | None) -> str:
    return "open" if value is None else f"{100 * value:+.2f}"


def attainment_plot(path: Path, record: CapacityRecord) -> Path:
    """Each arm's attainment per probed load with its 95% interval, the target, and each arm's capacity."""
    fig = new_figure(7.5, 4.2)
    ax = fig.add_subplot()
    loads = [level["load"] for level in record["levels"]]
    for (arm, label), color in zip(ARM_LABELS.items(), SERIES_COLORS, strict=False):
        points = [arm_attainment([r["attainment"] for r in lv["runs"][arm]], lv["requests"]) for lv in record["levels"]]
        ys = [100 * p.attainment for p in points]
        low = [100 * (p.attainment - p.ci_low) for p in points]
        high = [100 * (p.ci_high - p.attainment) for p in points]
        ax.errorbar(loads, ys, yerr=[low, high], fmt="o-", color=color, capsize=3, label=label)
        estimate = record["estimate"]
        capacity = estimate and estimate["capacity_a" if arm == "reference" else "capacity_b"]
        if capacity and capacity["bound"] == "exact" and capacity["load"] is not None:
            ax.axvline(capacity["load"], color=color, linestyle=":", linewidth=1.2)
    ax.axhline(100 * record["target"], color="#444444", linestyle="--", linewidth=1, label="target")
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ticker.LogFormatter())  # plain numbers (3, 5, 20), not 3x10^0
    ax.xaxis.set_minor_formatter(ticker.LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.4)))
    ax.set_xlabel(f"load ({record['search']['unit']})")
    ax.set_ylabel("requests meeting the SLO (%)")
    ax.set_title(f"{record['experiment']}: attainment per load (dotted: each arm's capacity)")
    ax.legend(loc="lower left", fontsize=8)
    return save_figure(fig, path)


LEVEL_COLUMNS = (
    "load",
    "offered req/s",
    "rounds",
    "requests",
    "reference",
    "configuration",
    "difference [95% CI]",
    "p",
    "achieved / goodput req/s: reference",
    "configuration",
)
"""The columns of :func:`level_rows`: each arm's attainment, their difference (configuration - reference, in
points), and each arm's achieved load and goodput (:func:`tuner.records.capacity.level_rates`)."""


def level_rows(record: CapacityRecord) -> list[list[str]]:
    """One row per probed load: rounds, each arm's attainment, their paired difference, each arm's achieved load and
    goodput."""
    rows = []
    for level in record["levels"]:
        difference = level["difference"]  # none at a load of one round
        rps = level["offered_rps"]
        paired = (
            f"{_signed(difference['difference'])} [{_signed(difference['ci_low'])}, {_signed(difference['ci_high'])}]"
            if difference
            else "- (one round)"
        )
        rows.append(
            [
                f"{level['load']:.4g}",
                "all at once" if rps is None or not math.isfinite(rps) else f"{rps:.3g}",
                str(level["rounds"]),
                str(level["requests"]),
                _pct(level["attainment"]["reference"]),
                _pct(level["attainment"]["configuration"]),
                paired,
                f"{difference['p_value']:.3g}" if difference else "-",
                *("{:.3g} / {:.3g}".format(*level_rates(level, arm)) for arm in ARMS),
            ]
        )
    return rows


def capacity_doc(record: CapacityRecord, plot: Path) -> Doc:
    """The report's document: the sentence, the search, each level and the plot."""
    search = record["search"]
    doc = Doc(f"Capacity: {record['experiment']}")
    doc.p(f"**{record['summary']}.**")
    chosen = record["configuration"]["strategies"]
    configuration = ", ".join(f"`{name}` {params or ''}" for name, params in chosen.items())
    doc.bullets(
        [
            f"configuration: {configuration}" + (f" (from `{record['against']}`)" if record["against"] else ""),
            f"reference: vLLM {record['vllm']} as installed, on the same engine ({record['mode']} mode)",
            f"load: {search['knob']} ({search['unit']}), bracketed from {search['start']:.4g} by x{search['growth']:g} "
            f"({search['rounds']} rounds a load), then a grid at most x{search['resolution']:g} apart, a round per "
            "load and pass",
            f"spent {search['spent_s']:.0f} of {search['budget_s']:.0f} engine seconds; stopped: {search['stop']}",
            f"created {record['created']}; method: {record['estimate']['method'] if record['estimate'] else '-'}",
        ]
    )
    doc.h("What the budget could resolve")
    doc.bullets(search["forecast"])
    doc.h("Attainment per load")
    doc.p(
        "Each round runs both arms once at the load, in mirrored order, with the same requests at the same send "
        "times; the difference (configuration - reference, points) is paired per request with the interval of "
        "`tuner.stats.attainment` (misses that come in bursts widen it). Achieved: requests per second of wall "
        "time over the load's rounds (below the offered load where an arm falls behind); goodput: those meeting "
        "every target. `tuner export loads` writes the table per arm as CSV, with each arm's attainment interval."
    )
    doc.table(LEVEL_COLUMNS, level_rows(record))
    doc.image(plot, "attainment per load, each arm with its 95% interval; dotted lines: the capacities")
    return doc


def write_capacity_report(directory: Path, record: CapacityRecord) -> list[Path]:
    """Write the plot, ``report.md`` and ``report.html`` into ``directory``; return their paths."""
    plot = attainment_plot(directory / "attainment.png", record)
    doc = capacity_doc(record, plot)
    markdown = write_text(directory / "report.md", doc.markdown())
    return [markdown, write_text(directory / "report.html", doc.html()), plot]
