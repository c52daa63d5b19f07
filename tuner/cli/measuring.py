"""The commands that measure on a live engine: ``tuner run``, ``calibrate``, ``capacity``, ``versions``, ``sweep``
and ``worker``. Each loads and checks its experiment first (a refusal waits for no measuring code), then imports its
wing and calls it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from tuner.cli.output import console, err_console, fail, user_errors
from tuner.cli.progress import ConsoleFeedback
from tuner.cli.tables import calibration_table, capacity_table, repetitions_table, telemetry_table

if TYPE_CHECKING:
    from tuner.config import Experiment

ExperimentFile = Annotated[Path, typer.Argument(help="experiment YAML file", show_default=False)]


def run(
    experiment: ExperimentFile,
    output: Annotated[Path | None, typer.Option(help="write run.json here (default: results/<name>/<time>/)")] = None,
) -> None:
    """Benchmark one configuration (its `strategies:` applied) and write run.json."""
    from tuner.records import check_destination

    with user_errors():
        if output is not None:  # before the experiment is loaded (vLLM imported, its engine arguments built): ~10 s
            check_destination(output, "--output")
        loaded = _load_writable(experiment)
        from tuner.run import run_experiment  # after the checks: a refusal waits for no measuring code

        path, record = run_experiment(loaded, ConsoleFeedback(console), output)
    repetitions = record["repetitions"]
    console.print(repetitions_table(repetitions, title=f"{loaded.name}: {len(repetitions)} repetitions"))
    console.print(telemetry_table(repetitions[-1]["processes"], title="GC telemetry per process (last repetition)"))
    console.print(f"engine start {record['engine']['start_s']:.1f} s · wrote [bold]{escape(str(path))}[/bold]")


def calibrate(
    experiment: ExperimentFile,
    budget_s: Annotated[float, typer.Option(min=2, help="engine seconds per step-level measurement (8 of them)")] = 12,
) -> None:
    """Measure on this host what a comparison costs and whether it is calibrated: A/A noise per method, known
    delays in EngineCore and the worker, the strategies active on this path. `tuner sweep` takes its grain."""
    with user_errors():
        loaded = _load_writable(experiment)
        from tuner.calibrate import run_calibration
        from tuner.records import calibration_path, cost_line, load_calibration

        directory = run_calibration(loaded, ConsoleFeedback(console), budget_s=budget_s)
        record = load_calibration(calibration_path(loaded.output_dir, loaded.name))
    assert record is not None  # just written
    console.print(calibration_table(record))
    console.print(cost_line(record))
    missed = [r for r in record["recovery"] if not r["covered"]]
    for r in missed:
        console.print(
            f"[red]warning:[/red] the known {r['side']} delay was not recovered at {r['block_steps']}-step blocks"
        )
    console.print(f"wrote [bold]{escape(str(directory))}[/bold] (calibration.json, report.md, precision.png)")


def capacity(
    experiment: ExperimentFile,
    against: Annotated[
        Path | None,
        typer.Option(help="the configuration to compare: a sweep's winner.yaml (default: the experiment's strategies)"),
    ] = None,
) -> None:
    """The largest load (a trace's speed, a rate or a concurrency) at which `measure.slo` (or each SLO tier of
    `capacity.tiers`) holds for the reference and for a configuration, and their ratio with a CI: both arms on one
    engine, paired per request."""
    with user_errors():
        loaded = _load_writable(experiment)
        from tuner.capacity import configuration_from, run_capacity

        path, record = run_capacity(
            loaded, configuration_from(loaded, against), ConsoleFeedback(console), against=against
        )
    console.print(capacity_table(record))
    console.print(record["summary"], soft_wrap=True, markup=False)  # its intervals' brackets are no markup
    plots = "attainment.png" + (", checks.png" if len(record["checks"]) > 1 else "")
    console.print(f"wrote [bold]{escape(str(path.parent))}[/bold] (capacity.json, report.md, {plots})")


def versions(
    experiment: ExperimentFile,
    pythons: Annotated[
        list[str], typer.Argument(help="two or more interpreters, each holding a vLLM install (oldest first)")
    ],
    starts: Annotated[
        int, typer.Option(min=2, help="engine starts per install and comparison (6 at least to call a change)")
    ] = 6,
    metric: Annotated[str, typer.Option(help="throughput or latency metric compared")] = "output_tokens_per_s",
    seed: Annotated[int, typer.Option(help="seeds the mirrored order's first arm and the bootstrap")] = 0,
) -> None:
    """Compare vLLM installs on this host with the same experiment: engine starts alternate in mirrored order,
    each in its install's own interpreter; with more than two installs, bisect the sequence for the step that
    changed the metric."""
    from tuner.metrics import METRIC_NAMES
    from tuner.versions import compare_installs, probe

    with user_errors():
        if len(pythons) < 2:
            fail("versions: give two interpreters at least")
        if metric not in METRIC_NAMES:
            fail(f"--metric: unknown metric {metric!r}")
        installs = [probe(python) for python in pythons]  # each install checked before the experiment loads vLLM
        loaded = _load_writable(experiment)
        compare_installs(
            loaded, experiment, installs, ConsoleFeedback(console), starts=starts, metric=metric, seed=seed
        )


def sweep(
    experiment: ExperimentFile,
    storage: Annotated[str | None, typer.Option(help="Optuna RDB URL (default: SQLite next to the results)")] = None,
    resume: Annotated[bool, typer.Option(help="continue an existing study without repeating finished trials")] = False,
    aa: Annotated[bool, typer.Option("--aa", help="A/A mode: compare the baseline against itself")] = False,
    study_name: Annotated[str | None, typer.Option(help="default: the experiment name (+ '-aa')")] = None,
    n_trials: Annotated[int | None, typer.Option(min=1, help="override search.n_trials")] = None,
) -> None:
    """Search strategy sets and engine args with Optuna, each trial paired against the baseline."""
    with user_errors():
        loaded = _load_writable(experiment)
        from tuner.sweep import run_sweep

        run_sweep(
            loaded,
            ConsoleFeedback(console),
            storage=storage,
            resume=resume,
            aa=aa,
            study_name=study_name,
            n_trials=n_trials,
        )


def worker(
    experiment: ExperimentFile,
    storage: Annotated[
        str, typer.Option(help="Optuna RDB URL all workers share: postgresql://... (sqlite:///... on one machine)")
    ],
    study_name: Annotated[str | None, typer.Option(help="default: the experiment name")] = None,
) -> None:
    """Run trials of a study shared by many workers (one or many machines) until it is done."""
    with user_errors():
        loaded = _load_writable(experiment)
        from tuner.sweep import run_worker

        run_worker(loaded, ConsoleFeedback(console), storage=storage, study_name=study_name)


def _load_writable(path: Path) -> Experiment:
    """The experiment, once its results directory is known to be writable: checked before any engine starts."""
    from tuner.config import load_experiment
    from tuner.errors import UserError
    from tuner.records import destination_problem

    experiment = load_experiment(path)
    for note in experiment.search.notes() if experiment.search else []:
        err_console.print(f"[yellow]note:[/yellow] {escape(f'{path}: {note}')}", highlight=False, soft_wrap=True)
    problem = destination_problem(experiment.output_dir / experiment.name / "result")
    if problem:
        raise UserError.single(str(experiment.output_dir), problem, "output_dir")
    return experiment
