"""CLI commands that read results: ``tuner report``, ``compare``, ``export bench``, ``export loads``, ``history``,
``pr-check`` and ``dashboard`` (registered from :data:`tuner.cli.commands.COMMANDS`). Each imports its library
module lazily (the CLI starts fast) and wraps its body in ``tuner.cli.user_errors()``, so bad input prints one line
and exits 2.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

ResultPath = Annotated[
    Path,
    typer.Argument(
        help="a run (its directory or run.json) or a sweep (the experiment directory, sweep/ or summary.json)",
        show_default=False,
    ),
]
SideSpec = Annotated[
    str,
    typer.Argument(
        help="a run directory or run.json, or a sweep trial as SWEEP#N (SWEEP#baseline for the baseline)",
        show_default=False,
    ),
]


class BenchKindOption(StrEnum):
    bigger = "bigger"
    smaller = "smaller"


class BenchSeriesOption(StrEnum):
    ratio = "ratio"
    absolute = "absolute"
    capacity = "capacity"


def report(
    path: ResultPath,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="report directory (default: report/ next to the input)")
    ] = None,
    storage: Annotated[
        str | None, typer.Option(help="report the study in this storage (shared by workers); PATH: its experiment")
    ] = None,
    study_name: Annotated[str | None, typer.Option(help="with --storage; default: the experiment name")] = None,
) -> None:
    """Write report.md, a self-contained report.html and PNG plots for a run or a sweep."""
    from tuner.cli.output import console, user_errors
    from tuner.report.build import build_report

    with user_errors():
        if storage is not None:
            from tuner.config import load_experiment
            from tuner.sweep import summarize_shared_study

            path = summarize_shared_study(load_experiment(path), storage, study_name)
        paths = build_report(path, out)
    console.print(f"wrote [bold]{paths[0].parent}[/bold]/: " + ", ".join(p.name for p in paths), soft_wrap=True)


def compare(
    a: SideSpec,
    b: SideSpec,
    as_json: Annotated[bool, typer.Option("--json", help="print machine-readable JSON instead of a table")] = False,
) -> None:
    """Compare B against A metric by metric: medians, ratio B/A with a 95% CI, p-value and verdict."""
    from tuner.cli.output import console, user_errors
    from tuner.cli.tables import compare_table
    from tuner.report.compare import compare_notes, compare_sides, load_side

    with user_errors():
        side_a, side_b = load_side(a), load_side(b)
        result = compare_sides(side_a, side_b)
    if as_json:
        typer.echo(json.dumps(result, indent=2, allow_nan=False, default=str))
        return
    console.print(compare_table(result))
    for line in compare_notes(result):
        console.print(line, highlight=False, soft_wrap=True)
    for note in result["differences"]:
        console.print(f"[yellow]warning:[/yellow] A and B differ in {note}", highlight=False)


def export_bench(
    path: ResultPath,
    output: Annotated[
        Path,
        typer.Option(
            "--output",
            "-o",
            help="JSON file to write; an option left out adds its part to the name: <stem>[-<series>][-<kind>].json",
            show_default=False,
        ),
    ],
    kind: Annotated[
        BenchKindOption | None,
        typer.Option(help="only one list: bigger (customBiggerIsBetter) or smaller (customSmallerIsBetter)"),
    ] = None,
    series: Annotated[
        BenchSeriesOption | None,
        typer.Option(
            help="only one series: ratio (a sweep's paired ratios to its baseline, per configuration), absolute "
            "(the baseline's or a run's own figures) or capacity (a capacity search's ratio)"
        ),
    ] = None,
    prefix: Annotated[str | None, typer.Option(help="benchmark name prefix (default: the experiment name)")] = None,
) -> None:
    """Export a run, sweep or capacity search for benchmark-action/github-action-benchmark (custom tools)."""
    from tuner.cli.output import console, user_errors
    from tuner.series.export import export_bench as write_bench

    with user_errors():
        paths = write_bench(
            path,
            output,
            kind=kind.value if kind else None,
            series=series.value if series else None,
            prefix=prefix,
        )
    for written in paths:
        console.print(f"wrote [bold]{written}[/bold]", soft_wrap=True)


def history(
    path: Annotated[
        Path,
        typer.Argument(
            help="github-action-benchmark's data.js (from gh-pages), or a directory of exported files named "
            "<order>-<commit>[-<part>].json",
            show_default=False,
        ),
    ],
    series: Annotated[
        list[str] | None, typer.Option("--series", "-s", help="only series whose name matches this glob (repeatable)")
    ] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="directory for one PNG plot per series")] = Path("history"),
    summary: Annotated[
        Path | None, typer.Option(help='append a markdown summary to this file (e.g. "$GITHUB_STEP_SUMMARY")')
    ] = None,
    max_p: Annotated[float, typer.Option(min=0.0, max=1.0, help="largest p-value of a change point")] = 0.001,
    min_change: Annotated[
        float, typer.Option(min=0.0, help="ignore change points whose mean moves less than this many percent")
    ] = 0.0,
) -> None:
    """Find change points in stored benchmark series (Apache Otava) and plot each series."""
    from rich.table import Table

    from tuner.cli.output import console, user_errors
    from tuner.series.history import analyse_series as analyse
    from tuner.series.history import append_markdown, summary_markdown

    with user_errors():
        results = analyse(path, out, patterns=series or [], max_p=max_p, min_change_pct=min_change)
        if summary is not None:
            append_markdown(summary, summary_markdown(results, path, max_p))
    table = Table(title=f"Change points (p ≤ {max_p:g})")
    for column in ("series", "commits", "change", "mean before → after", "p", "verdict"):
        table.add_column(column, justify="left" if column in ("series", "commits", "verdict") else "right")
    colors = {"regression": "red", "improvement": "green", "change": "yellow"}
    for result in results:
        for cp in result.change_points:
            table.add_row(
                result.series.name,
                f"{cp.before[:12]}..{cp.after[:12]}",
                f"{cp.change_pct:+.2f}%",
                f"{cp.mean_before:.4g} → {cp.mean_after:.4g} {result.series.unit}".rstrip(),
                f"{cp.p_value:.2g}",
                f"[{colors[cp.verdict]}]{cp.verdict}[/]",
            )
    found = sum(len(r.change_points) for r in results)
    if found:
        console.print(table)
    console.print(f"{len(results)} series, {found} change point(s); plots in [bold]{out}[/bold]/", soft_wrap=True)


EXIT_REGRESSION = 6


def pr_check(
    exports: Annotated[
        list[Path],
        typer.Argument(help="the PR's `tuner export bench` files (e.g. bench/ratio-*.json)", show_default=False),
    ],
    base: Annotated[
        Path,
        typer.Option(help="the base branch's stored series: github-action-benchmark's data.js, or an export directory"),
    ],
    series: Annotated[
        list[str] | None, typer.Option("--series", "-s", help="only series whose name matches this glob (repeatable)")
    ] = None,
    base_commit: Annotated[
        str | None, typer.Option(help="the PR's base commit: stored points after it are left out")
    ] = None,
    window: Annotated[int, typer.Option(min=3, help="the base's last stored points used")] = 20,
    alpha: Annotated[float, typer.Option(min=0.0, max=0.5, help="chance of any false call per PR (Holm)")] = 0.05,
    min_change: Annotated[float, typer.Option(min=0.0, help="smallest change (percent) called")] = 2.0,
    comment: Annotated[Path | None, typer.Option(help="write the PR comment (markdown) here")] = None,
    fail_on_regression: Annotated[bool, typer.Option(help=f"exit {EXIT_REGRESSION} when a series regressed")] = False,
) -> None:
    """Compare a PR's exported series with its base branch's stored series (not the single previous point)."""
    from rich.table import Table

    from tuner.cli.output import console, user_errors
    from tuner.records import write_text
    from tuner.series.pr_check import check_pull_request as check
    from tuner.series.pr_check import comment_markdown

    with user_errors():
        checks = check(
            exports,
            base,
            patterns=series or [],
            base_commit=base_commit,
            window=window,
            alpha=alpha,
            min_change_pct=min_change,
        )
    table = Table(title=f"PR vs base ({base})")
    for column in ("series", "PR", "base", "change", "p worse", "p better", "verdict"):
        table.add_column(column, justify="left" if column in ("series", "verdict") else "right", overflow="fold")
    colors = {"regression": "red", "improvement": "green", "unchanged": "default", "no base": "yellow"}
    for c in checks:
        base_text = "-" if c.base_mean is None else f"{c.base_mean:.4g} (n={c.base_points})"
        table.add_row(
            c.name,
            f"{c.value:.4g}",
            base_text,
            "-" if c.change_pct is None else f"{c.change_pct:+.2f}%",
            "-" if c.p_worse is None else f"{c.p_worse:.2g}",
            "-" if c.p_better is None else f"{c.p_better:.2g}",
            f"[{colors[c.verdict]}]{c.verdict}[/]",
        )
    console.print(table)
    if comment is not None:
        label = f"the base's stored series (up to {base_commit[:12]})" if base_commit else "the base's stored series"
        write_text(comment, comment_markdown(checks, base_label=label, alpha=alpha, min_change_pct=min_change))
        console.print(f"wrote [bold]{comment}[/bold]", soft_wrap=True)
    if fail_on_regression and any(c.verdict == "regression" for c in checks):
        raise typer.Exit(EXIT_REGRESSION)


def dashboard(
    exports: Annotated[
        list[Path], typer.Argument(help="`tuner export bench` files, one per run, oldest first", show_default=False)
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="the PNG to write")] = Path("dashboard.png"),
    title: Annotated[str, typer.Option(help="the figure's title")] = "host-side performance series",
) -> None:
    """Render github-action-benchmark's charts from exported files (one PNG: a chart per series)."""
    from tuner.cli.output import console, user_errors
    from tuner.series.dashboard import render

    with user_errors():
        path = render(exports, out, title)
    console.print(f"wrote [bold]{path}[/bold]", soft_wrap=True)


def export_loads(
    path: Annotated[
        Path,
        typer.Argument(
            help="a capacity search: its capacity.json, its directory or the experiment's", show_default=False
        ),
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="CSV file to write", show_default=False)],
) -> None:
    """Export a capacity search's per-load table as CSV: per load and arm, offered and achieved load, goodput,
    attainment and the paired difference with their intervals."""
    from tuner.cli.output import console, user_errors
    from tuner.report.load_table import export_loads as write_loads

    with user_errors():
        written = write_loads(path, output)
    console.print(f"wrote [bold]{written}[/bold]", soft_wrap=True)
