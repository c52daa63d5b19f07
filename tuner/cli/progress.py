"""Library feedback on the terminal: notes, tables and progress bars with rich."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.text import Text

from tuner.cli.tables import render
from tuner.feedback import Level, TableData, Task

STYLES: dict[Level, str] = {"info": "", "heading": "bold", "warning": "yellow", "error": "red"}


class ConsoleFeedback:
    """:class:`tuner.feedback.Feedback` on a rich console; one live progress display while any task is open."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._progress: Progress | None = None
        self._open = 0

    def note(self, text: str, level: Level = "info") -> None:
        self.console.print(Text(text, style=STYLES[level]), soft_wrap=True)

    def table(self, table: TableData) -> None:
        self.console.print(render(table))

    def task(self, description: str, total: int | None) -> Task:
        if self._progress is None:
            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("[progress.description]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self._progress.start()
        self._open += 1
        return _RichTask(self, self._progress, self._progress.add_task(description, total=total))

    def _task_closed(self) -> None:
        self._open -= 1
        if self._open == 0 and self._progress is not None:
            self._progress.stop()
            self._progress = None


class _RichTask:
    def __init__(self, owner: ConsoleFeedback, progress: Progress, task_id: TaskID) -> None:
        self._owner, self._progress, self._id = owner, progress, task_id
        self._closed = False

    def update(self, completed: int | None = None, *, description: str | None = None) -> None:
        self._progress.update(self._id, completed=completed, description=description)

    def advance(self, steps: int = 1) -> None:
        self._progress.advance(self._id, steps)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._progress.remove_task(self._id)
            self._owner._task_closed()
