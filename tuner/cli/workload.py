"""``tuner workload inspect``: what a dataset's traffic looks like, before any engine time is spent on it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tuner.traffic.dataset import Format

workload_app = typer.Typer(help="Check request files before replaying them.", no_args_is_help=True)


@workload_app.command("inspect")
def inspect(
    file: Annotated[
        Path,
        typer.Argument(
            help="a dataset file (mooncake, sharegpt, jsonl, burstgpt), or an experiment file with workload.dataset "
            "(then exactly the requests it replays)",
            show_default=False,
        ),
    ],
    format: Annotated[
        Format | None, typer.Option("--format", "-f", help="the file's format (default: from its name or first line)")
    ] = None,
    tokenizer: Annotated[
        str | None, typer.Option(help="text formats: the model whose tokenizer counts tokens (local dir or hub id)")
    ] = None,
    skip_bad: Annotated[
        bool, typer.Option(help="skip records that do not parse (counted) instead of refusing")
    ] = False,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="where to write workload.json and workload.png (default: under results/)"),
    ] = None,
) -> None:
    """Print the requests' lengths, arrivals and prefix reuse, and write the plot, without starting an engine."""
    from tuner.cli.output import console, user_errors
    from tuner.config import load_experiment
    from tuner.errors import UserError
    from tuner.records.files import write_json
    from tuner.report.workload_section import PLOT, describe, length_rows, workload_plot
    from tuner.traffic.inspect import guess_format, inspect_file
    from tuner.traffic.workload import dataset_plan

    with user_errors():
        if file.suffix.lower() in {".yaml", ".yml"}:
            experiment = load_experiment(file)
            if experiment.workload.dataset is None:
                raise UserError.single(str(file), "no workload.dataset: its requests are synthetic", "workload")
            _, _, record = dataset_plan(experiment)
            out = output or experiment.output_dir / experiment.name / "workload"
            title = experiment.name
        else:
            fmt = format or guess_format(file)
            if fmt is None:
                raise UserError.single(str(file), "cannot tell its format from its name or first line: give --format")
            record = inspect_file(file, fmt, tokenizer_model=tokenizer, skip_bad=skip_bad)
            out = output or Path("results") / "inspect" / file.stem
            title = file.name
        for line in describe(record):
            console.print(line, highlight=False, soft_wrap=True)
        table = Table()
        for column in ("", "min", "p50", "p90", "p99", "max", "mean", "total"):
            table.add_column(column, justify="left" if not column else "right")
        for row in length_rows(record):
            table.add_row(*row)
        console.print(table)
        try:
            written = [
                write_json(out / "workload.json", record),
                workload_plot(out / PLOT, record["shape"], title=title),
            ]
        except OSError as exc:
            raise UserError.single(str(out), f"cannot write: {exc.strerror or exc}") from None
        console.print("wrote " + ", ".join(str(p) for p in written), highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(workload_app, name="workload")
