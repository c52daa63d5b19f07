"""Errors the CLI turns into a clear message and an exit status (never a traceback)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input: where it is and what is wrong."""

    message: str
    field: str = ""
    line: int | None = None

    def render(self, file: str) -> str:
        """``file:line: field: message`` on one line (control characters escaped)."""
        where = file + (f":{self.line}" if self.line else "")
        text = f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


class UserError(Exception):
    """Bad input or an unusable environment; the message says what to fix."""

    def __init__(self, file: str, problems: list[Problem]) -> None:
        self.file = file
        self.problems = problems
        super().__init__("\n".join(p.render(file) for p in problems))

    @classmethod
    def single(cls, file: str, message: str, field: str = "", line: int | None = None) -> UserError:
        return cls(file, [Problem(message, field, line)])


class StudyIncomplete(RuntimeError):
    """A study did not measure what it was asked to (exit 5); its summary is written all the same."""


class EngineError(RuntimeError):
    """The engine could not start or died; the message says why (vLLM logs the details above it)."""


class EnvNotInForce(EngineError):
    """An engine process runs without one of vLLM's environment variables its start set: it is not the engine the
    experiment or trial asked for."""


class StrategyNotActive(RuntimeError):
    """A requested strategy is not active in a process where it belongs: every number would be a lie."""


class ResultRelocated(Exception):
    """A measured result could not be written where asked and went to ``path`` instead: the message says both."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path
