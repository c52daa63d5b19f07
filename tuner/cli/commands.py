"""Every ``tuner`` command and the module that implements it, in one table (as vLLM's ``SUBCOMMANDS``).

The CLI modules register thin typer commands that call the module named here; ``tests/test_architecture.py`` checks
that every registered command is in this table, that every module exists, and that no command's module imports
another command's. A new command is one row here, one thin function in ``tuner/cli/`` and a module (or a wing, a
package of its own) that implements it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    """One command as typed (``"export bench"``) and the module or package (a wing) that implements it."""

    name: str
    module: str
    summary: str


COMMANDS: tuple[Command, ...] = (
    Command("run", "tuner.run", "benchmark one configuration on a live engine; write run.json"),
    Command("calibrate", "tuner.calibrate", "what a comparison costs on this host, and whether it is calibrated"),
    Command("sweep", "tuner.sweep", "search strategy sets and engine args, screened then confirmed"),
    Command("worker", "tuner.sweep", "run trials of a study shared by many workers"),
    Command("capacity", "tuner.capacity", "the largest load within the SLO, reference and configuration, paired"),
    Command("versions", "tuner.versions", "compare vLLM installs on this host; bisect the step that changed"),
    Command("report", "tuner.report.run", "Markdown + HTML report with plots for a run, sweep or calibration"),
    Command("compare", "tuner.report.compare", "two runs, or two trials of a sweep, metric by metric"),
    Command("export bench", "tuner.series.export", "results as github-action-benchmark input"),
    Command("export loads", "tuner.report.load_table", "a capacity search's per-load table as CSV"),
    Command("history", "tuner.series.history", "change points in stored benchmark series (Apache Otava)"),
    Command("pr-check", "tuner.series.pr_check", "a pull request's series against its base branch's"),
    Command("dashboard", "tuner.series.dashboard", "github-action-benchmark's charts from exported series"),
    Command("workload inspect", "tuner.traffic.inspect", "what a request file's traffic looks like, without an engine"),
    Command("strategies list", "strategies.framework.registry", "one line per strategy: applies, vLLM, upstream"),
    Command("strategies show", "strategies.framework.registry", "one strategy in full: parameters, processes, paths"),
)
"""Every command, in the order ``tuner --help`` groups them."""
