"""``tuner workload inspect``: what a dataset's traffic looks like, before any engine time is spent on it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from tuner.traffic import Format


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
    from tuner.errors import UserError
    from tuner.records import write_json
    from tuner.report import PLOT, describe_workload, length_rows, workload_plot
    from tuner.traffic.inspect import inspected

    with user_errors():
        if file.suffix.lower() in {".yaml", ".yml"}:
            from tuner.measure import experiment_workload

            record, default_out, title = experiment_workload(file)
        else:
            record, default_out, title = inspected(file, format, tokenizer_model=tokenizer, skip_bad=skip_bad)
        out = output or default_out
        for line in describe_workload(record):
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
