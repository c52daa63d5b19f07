"""The capacity search's report: ``report.md``, ``report.html``, ``attainment.png`` and, with SLO tiers,
``checks.png`` beside ``capacity.json``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from matplotlib import ticker
from matplotlib.axes import Axes

from tuner.records import ARMS, CapacityRecord, SearchRecord, level_rates, restart_seconds, write_text
from tuner.report.document import Doc
from tuner.report.figures import SERIES_COLORS, new_figure, save_figure
from tuner.stats import ArmCapacityRecord, arm_attainment

ARM_LABELS = {"reference": "reference (vLLM as installed)", "configuration": "configuration"}


def _pct(value: float | None) -> str:
    return "open" if value is None else f"{100 * value:.2f}%"


def _signed(value: float | None) -> str:
    return "open" if value is None else f"{100 * value:+.2f}"


def attainment_plot(path: Path, record: CapacityRecord) -> Path:
    """Each arm's attainment per probed load with its 95% interval, the target, and each arm's capacity; below it,
    each arm's achieved load and goodput per probed load."""
    fig = new_figure(7.5, 7.0)
    ax = fig.add_subplot(2, 1, 1)
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
    first = record["tiers"][0]
    if len(first["shares"]) == 1:  # a tier of several checks has a line per check: checks.png
        ax.axhline(100 * first["shares"][0]["least"], color="#444444", linestyle="--", linewidth=1, label="target")
    if loads:  # none in a search stopped before its first load: an empty plot
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ticker.LogFormatter())  # plain numbers (3, 5, 20), not 3x10^0
        ax.xaxis.set_minor_formatter(ticker.LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.4)))
    ax.set_ylabel("requests meeting the SLO (%)" if first["name"] == "slo" else f"passing all of {first['name']} (%)")
    ax.set_title(f"{record['experiment']}: attainment per load (dotted: each arm's capacity)")
    ax.legend(loc="lower left", fontsize=8)
    _rates_panel(fig.add_subplot(2, 1, 2, sharex=ax), record)
    return save_figure(fig, path)


def _rates_panel(ax: Axes, record: CapacityRecord) -> None:
    """Each arm's achieved requests/s (solid) and goodput (dashed, the first tier's) per probed load, beside the
    offered rate (grey) where the load sets send times."""
    loads = [level["load"] for level in record["levels"]]
    if not loads:  # a search stopped before its first load
        return
    for (arm, label), color in zip(ARM_LABELS.items(), SERIES_COLORS, strict=False):
        achieved, goodput = zip(*(level_rates(level, arm) for level in record["levels"]), strict=True)
        ax.plot(loads, achieved, "o-", color=color, label=f"{label}: achieved")
        ax.plot(loads, goodput, "s--", color=color, label=f"{label}: goodput")
    offered = [level["offered_rps"] for level in record["levels"]]
    if all(x is not None and math.isfinite(x) for x in offered):
        ax.plot(loads, offered, color="#999999", linewidth=1, label="offered")
    ax.set_xlabel(f"load ({record['search']['unit']})")
    ax.set_ylabel("requests/s")
    ax.set_title("achieved load and goodput per load", fontsize=9)
    ax.legend(loc="upper left", fontsize=7)


def checks_plot(path: Path, record: CapacityRecord) -> Path:
    """One panel per check of the SLO: each arm's share of requests that passed it per probed load, and the share
    each tier asks of it."""
    checks = record["checks"]
    fig = new_figure(7.5, 2.6 * len(checks))
    loads = [level["load"] for level in record["levels"]]
    for index, check in enumerate(checks):
        ax = fig.add_subplot(len(checks), 1, index + 1)
        for (arm, label), color in zip(ARM_LABELS.items(), SERIES_COLORS, strict=False):
            ax.plot(loads, [100 * lv["checks"][index][arm] for lv in record["levels"]], "o-", color=color, label=label)
        for tier in record["tiers"]:
            for share in (s for s in tier["shares"] if s["check"] == index):
                ax.axhline(100 * share["least"], color="#444444", linestyle="--", linewidth=1)
                ax.annotate(tier["name"], (loads[0], 100 * share["least"]), fontsize=7, va="bottom")
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ticker.LogFormatter())
        ax.set_ylabel("passed (%)")
        ax.set_title(check["words"], fontsize=9)
    ax.set_xlabel(f"load ({record['search']['unit']})")
    fig.axes[0].legend(loc="lower left", fontsize=8)
    return save_figure(fig, path)


def _capacity_cell(capacity: ArmCapacityRecord) -> str:
    """``4.2 [3.9, 4.5]``, or the bound where the search did not bracket it."""
    load = f"{capacity['load']:.4g}" if capacity["load"] is not None else "-"
    if capacity["bound"] == "at_least":
        return f"at least {load}"
    if capacity["bound"] == "below":
        return f"below {load}"
    low, high = (f"{x:.4g}" if x is not None else "open" for x in (capacity["ci_low"], capacity["ci_high"]))
    return f"{load} [{low}, {high}]"


TIER_COLUMNS = ("tier", "SLO", "reference capacity [95% CI]", "configuration capacity", "ratio [95% CI]")


def tier_rows(record: CapacityRecord) -> list[list[str]]:
    """One row per SLO tier: its words, each arm's capacity and their ratio, each with its interval."""
    rows = []
    for tier in record["tiers"]:
        estimate = tier["estimate"]
        if estimate is None:
            rows.append([tier["name"], tier["words"], "-", "-", "-"])
            continue
        ratio = "-" if estimate["ratio"] is None else f"{estimate['ratio']:.3f}"
        low, high = (f"{x:.3f}" if x is not None else "open" for x in (estimate["ci_low"], estimate["ci_high"]))
        capacities = (_capacity_cell(estimate[key]) for key in ("capacity_a", "capacity_b"))
        rows.append([tier["name"], tier["words"], *capacities, f"{ratio} [{low}, {high}]"])
    return rows


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


def _skipped(search: SearchRecord) -> str:
    """The rounds over-saturated loads did not run, where there were any."""
    skipped = search["oversaturated"]
    if not skipped["rounds"]:
        return ""
    return (
        f"; {skipped['rounds']:.0f} round(s) at {skipped['loads']:.0f} over-saturated load(s) not run, both arms "
        f"missing every tier whatever those rounds would show (~{skipped['saved_s']:.0f} engine-s saved)"
    )


def _arms_words(record: CapacityRecord) -> list[str]:
    """What each arm runs: the configuration's own strategies, engine args and variables; the reference's
    strategies in both arms; and whether they shared one engine or ran by restart pairs."""
    both, configuration = record["reference"]["strategies"], record["configuration"]
    own = {name: params for name, params in configuration["strategies"].items() if both.get(name) != params}
    changes = [_strategies_words(own)] if own else []
    changes += [f"`{key}`: {value!r}" for key, value in {**configuration["engine"], **configuration["env"]}.items()]
    engines = (
        "by restart pairs, an engine per arm and pass"
        if record["search"]["restarts"] is not None
        else ("on the same engine")
    )
    return [
        f"configuration: {', '.join(changes) or 'the reference'}"
        + (f" (from `{record['against']}`)" if record["against"] else ""),
        f"reference: vLLM {record['vllm']} as installed"
        + (f", with {_strategies_words(both)} in both arms" if both else "")
        + f", {engines} ({record['mode']} mode)",
    ]


def _restarts(search: SearchRecord) -> str:
    """The engine starts of restart pairs and the time they took, where the arms ran so."""
    starts = search["restarts"]
    if not starts:
        return ""
    took = sum(restart_seconds(r) for r in starts)
    return f"; {len(starts)} engine starts and stops took {took:.0f} s of it ({took / len(starts):.0f} s each)"


def _strategies_words(strategies: Mapping[str, Mapping[str, Any]]) -> str:
    return ", ".join(f"`{name}` {params or ''}" for name, params in strategies.items())


def capacity_doc(record: CapacityRecord, plot: Path) -> Doc:
    """The report's document: the sentence, the search, each level and the plot."""
    search = record["search"]
    doc = Doc(f"Capacity: {record['experiment']}")
    doc.p(f"**{record['summary']}.**")
    doc.bullets(
        [
            *_arms_words(record),
            f"load: {search['knob']} ({search['unit']}), bracketed from {search['start']:.4g} by x{search['growth']:g} "
            f"({search['rounds']} rounds a load), then a grid at most x{search['resolution']:g} apart, a round per "
            "load and pass",
            f"spent {search['spent_s']:.0f} of {search['budget_s']:.0f} engine seconds; stopped: {search['stop']}"
            + _skipped(search)
            + _restarts(search),
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


def _tiers_section(doc: Doc, record: CapacityRecord, plot: Path | None) -> None:
    """Each tier's capacities and ratio; with several checks, each check's share per load (``plot``)."""
    doc.h("Capacity per SLO tier")
    doc.p(
        "Every tier is estimated from the same runs: a tier is met at a load when each of its checks is, so its "
        "capacity is the lowest of its checks' crossings. The attainment table above and its plot are those of the "
        f"first tier ({record['tiers'][0]['name']}); `tuner export loads` writes every tier's per load."
    )
    doc.table(TIER_COLUMNS, tier_rows(record))
    if plot is not None:
        doc.image(plot, "the share of requests that passed each check per load; dashed: the share each tier asks")


def write_capacity_report(directory: Path, record: CapacityRecord) -> list[Path]:
    """Write the plots, ``report.md`` and ``report.html`` into ``directory``; return their paths."""
    plot = attainment_plot(directory / "attainment.png", record)
    checks = checks_plot(directory / "checks.png", record) if len(record["checks"]) > 1 else None
    doc = capacity_doc(record, plot)
    _tiers_section(doc, record, checks)
    markdown = write_text(directory / "report.md", doc.markdown())
    return [markdown, write_text(directory / "report.html", doc.html()), plot, *([checks] if checks else [])]
