"""The terminal: the consoles, exit statuses, and the library's expected failures turned into one-line errors."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from tuner import interrupts
from tuner.errors import EngineError, ResultRelocated, StrategyNotActive, StudyIncomplete, UserError

# Piped output (CI logs, tee) would wrap tables at rich's 80-column default; COLUMNS still wins.
console = Console(width=None if sys.stdout.isatty() or "COLUMNS" in os.environ else 160)
err_console = Console(stderr=True)

EXIT_BAD_INPUT = 2
EXIT_NOT_ACTIVE = 3
EXIT_ENGINE = 4
EXIT_INCOMPLETE = 5
EXIT_INTERRUPTED = 130


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    err_console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn the library's expected failures into a message and an exit status (never a traceback)."""
    try:
        yield
    except UserError as exc:
        for problem in exc.problems:
            err_console.print(f"[red]error:[/red] {escape(problem.render(exc.file))}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    except ResultRelocated as exc:
        fail(str(exc), EXIT_BAD_INPUT)
    except StrategyNotActive as exc:
        fail(str(exc), EXIT_NOT_ACTIVE)
    except EngineError as exc:
        fail(str(exc), EXIT_ENGINE)
    except StudyIncomplete as exc:
        fail(str(exc), EXIT_INCOMPLETE)
    except KeyboardInterrupt:
        interrupts.acknowledge()
        fail("interrupted", EXIT_INTERRUPTED)
    except OSError as exc:  # a file a command writes or reads: the place is the problem, not the tuner
        where = f"{exc.filename}: " if exc.filename else ""
        fail(f"{where}cannot write or read: {exc.strerror or exc}", EXIT_BAD_INPUT)
