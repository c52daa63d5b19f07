"""CLI commands that read results: ``tuner report``, ``tuner compare`` and ``tuner export bench``.

``tuner.cli`` adds them with ``register(app)``. Each command imports its library module lazily (the CLI starts
fast) and wraps its body in ``tuner.cli.user_errors()``, so bad input prints one line and exits 2.
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
    from tuner.cli import console, user_errors
    from tuner.report import build_report

    with user_errors():
        if storage is not None:
            from tuner.config import load_experiment
            from tuner.worker import summarize_shared_study

            path = summarize_shared_study(load_experiment(path), storage, study_name)
        paths = build_report(path, out)
    console.print(f"wrote [bold]{paths[0].parent}[/bold]/: " + ", ".join(p.name for p in paths), soft_wrap=True)


def compare(
    a: SideSpec,
    b: SideSpec,
    as_json: Annotated[bool, typer.Option("--json", help="print machine-readable JSON instead of a table")] = False,
) -> None:
    """Compare B against A metric by metric: medians, ratio B/A with a 95% CI, p-value and verdict."""
    from tuner.cli import console, user_errors
    from tuner.compare import compare as compare_sides
    from tuner.compare import compare_notes, compare_table, load_side

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
            help="JSON file to write; without --kind two files: <stem>-bigger.json and <stem>-smaller.json",
            show_default=False,
        ),
    ],
    kind: Annotated[
        BenchKindOption | None,
        typer.Option(help="only one list: bigger (customBiggerIsBetter) or smaller (customSmallerIsBetter)"),
    ] = None,
    prefix: Annotated[str | None, typer.Option(help="benchmark name prefix (default: the experiment name)")] = None,
) -> None:
    """Export a run or sweep for benchmark-action/github-action-benchmark (custom tools)."""
    from tuner.bench_export import export_bench as write_bench
    from tuner.cli import console, user_errors

    with user_errors():
        paths = write_bench(path, output, kind=kind.value if kind else None, prefix=prefix)
    for written in paths:
        console.print(f"wrote [bold]{written}[/bold]", soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``report``, ``compare`` and ``export bench`` to ``app``."""
    app.command("report")(report)
    app.command("compare")(compare)
    export_app = typer.Typer(help="Export results for other tools.", no_args_is_help=True)
    export_app.command("bench")(export_bench)
    app.add_typer(export_app, name="export")
