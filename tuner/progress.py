"""Rich progress displays shared by the commands."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn


def progress_bars(console: Console) -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


@contextmanager
def starting_engine(console: Console, model: str) -> Iterator[None]:
    """A spinner with elapsed time while vLLM starts (tens of seconds here, minutes cold on a GPU)."""
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=True
    ) as progress:
        progress.add_task(f"starting vLLM engine ({model})", total=None)
        yield
