"""The command line: all terminal input and output (typer and rich live only here), on top of the library."""

from __future__ import annotations

from tuner.cli.main import app, main

__all__ = ["app", "main"]
