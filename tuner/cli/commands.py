"""Every ``tuner`` command in one table that *is* the dispatch (as vLLM's ``benchmarks/sweep/cli.py``
``SUBCOMMANDS``): its name as typed, the thin typer function that parses it and the module that implements it.

:mod:`tuner.cli.main` registers exactly these rows; ``tests/test_architecture.py`` checks that every module exists,
that no command's module imports another command's, and that the README and ``docs/commands.md`` list this table.
A new command is one row here, one thin function in ``tuner/cli/`` and a module (or a wing, a package of its own)
that implements it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tuner.cli import measuring, results, strategies, workload


@dataclass(frozen=True)
class Command:
    """One command as typed (``"export bench"``: ``bench`` in the ``export`` group), its typer function, and the
    module or package (a wing) that implements it."""

    name: str
    handler: Callable[..., None]
    module: str
    summary: str


GROUPS = {
    "export": "Export results for other tools.",
    "workload": "Check request files before replaying them.",
    "strategies": "Inspect the available strategies.",
}
"""The help of each group of two-word commands."""

COMMANDS: tuple[Command, ...] = (
    Command("run", measuring.run, "tuner.run", "benchmark one configuration on a live engine; write run.json"),
    Command(
        "calibrate",
        measuring.calibrate,
        "tuner.calibrate",
        "what a comparison costs on this host, and whether it is calibrated",
    ),
    Command("sweep", measuring.sweep, "tuner.sweep", "search strategy sets and engine args, screened then confirmed"),
    Command("worker", measuring.worker, "tuner.sweep", "run trials of a study shared by many workers"),
    Command(
        "capacity",
        measuring.capacity,
        "tuner.capacity",
        "the largest load within the SLO, reference and configuration, paired",
    ),
    Command(
        "versions",
        measuring.versions,
        "tuner.versions",
        "compare vLLM installs on this host; bisect the step that changed",
    ),
    Command(
        "report",
        results.report,
        "tuner.report.build",
        "Markdown + HTML report with plots for a run, sweep or calibration",
    ),
    Command("compare", results.compare, "tuner.report.compare", "two runs, or two trials of a sweep, metric by metric"),
    Command("export bench", results.export_bench, "tuner.series.export", "results as github-action-benchmark input"),
    Command(
        "export loads", results.export_loads, "tuner.report.load_table", "a capacity search's per-load table as CSV"
    ),
    Command(
        "history", results.history, "tuner.series.history", "change points in stored benchmark series (Apache Otava)"
    ),
    Command("pr-check", results.pr_check, "tuner.series.pr_check", "a pull request's series against its base branch's"),
    Command(
        "dashboard",
        results.dashboard,
        "tuner.series.dashboard",
        "github-action-benchmark's charts from exported series",
    ),
    Command(
        "workload inspect",
        workload.inspect,
        "tuner.traffic.inspect",
        "what a request file's traffic looks like, without an engine",
    ),
    Command(
        "strategies list",
        strategies.strategies_list,
        "strategies.framework.registry",
        "one line per strategy: applies, vLLM, upstream",
    ),
    Command(
        "strategies show",
        strategies.strategies_show,
        "strategies.framework.registry",
        "one strategy in full: parameters, processes, paths",
    ),
)
"""Every command, in the order ``tuner --help`` lists them."""
