"""The ``tuner`` command line, registered from its command table (:data:`tuner.cli.commands.COMMANDS`).

Exit status: 0 the command measured what it was asked to; 2 bad input (one line per problem, before any engine
starts); 3 a requested strategy is not active; 4 the engine could not start or died (``tuner run``); 5 a study is
incomplete (its baseline or every trial failed, or some trials failed; the summary is written); 130 interrupted.
"""

from __future__ import annotations

import typer

from tuner import interrupts
from tuner.cli.commands import COMMANDS, GROUPS, Command


def build(commands: tuple[Command, ...]) -> typer.Typer:
    """The typer application of ``commands``: ``"export bench"`` is ``bench`` in the ``export`` group."""
    application = typer.Typer(
        help="Benchmark and tune vLLM's host-side performance on a live engine.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )
    groups: dict[str, typer.Typer] = {}
    for command in commands:
        head, _, sub = command.name.partition(" ")
        if not sub:
            application.command(head)(command.handler)
            continue
        if head not in groups:
            groups[head] = typer.Typer(help=GROUPS[head], no_args_is_help=True)
            application.add_typer(groups[head], name=head)
        groups[head].command(sub)(command.handler)
    return application


app = build(COMMANDS)


def main() -> None:
    """Console-script entry point. SIGTERM is handled like Ctrl-C, in every phase (see :mod:`tuner.interrupts`):
    the trial in progress is recorded as interrupted, engines and servers are stopped, what finished is kept."""
    interrupts.install()
    app()


if __name__ == "__main__":
    main()
