"""How the library tells its caller what it is doing, without printing: notes, tables and progress tasks.

Long work (engine starts, sweeps, confirmation pairs) reports through a :class:`Feedback` it is given; the command
line renders it with rich (:mod:`tuner.cli.output`), tests and embedding code pass :data:`SILENT` or their own.
Tables are plain data (:class:`TableData`), so the library builds them and the caller decides how they look.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal, Protocol

Level = Literal["info", "heading", "warning", "error"]


@dataclass(frozen=True)
class TableData:
    """A table to show: a title, column names, rows of text, and an optional caption under it."""

    title: str
    columns: Sequence[str]
    rows: Sequence[Sequence[str]]
    caption: str | None = None


class Task(Protocol):
    """One progress line: ``total`` steps (None: unknown), advanced as the work goes."""

    def update(self, completed: int | None = None, *, description: str | None = None) -> None: ...

    def advance(self, steps: int = 1) -> None: ...

    def close(self) -> None: ...


class Feedback(Protocol):
    def note(self, text: str, level: Level = "info") -> None:
        """A line of plain text (no markup) for the person running the command."""

    def table(self, table: TableData) -> None:
        """A table of results."""

    def task(self, description: str, total: int | None) -> Task:
        """A progress task; the caller closes it when done."""


class _SilentTask:
    def update(self, completed: int | None = None, *, description: str | None = None) -> None:
        pass

    def advance(self, steps: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


class Silent:
    """Feedback that shows nothing (library use, tests)."""

    def note(self, text: str, level: Level = "info") -> None:
        pass

    def table(self, table: TableData) -> None:
        pass

    def task(self, description: str, total: int | None) -> Task:
        return _SilentTask()


SILENT = Silent()


@contextmanager
def task(feedback: Feedback, description: str, total: int | None) -> Iterator[Task]:
    """A progress task closed when the block ends, also on an error."""
    handle = feedback.task(description, total)
    try:
        yield handle
    finally:
        handle.close()
