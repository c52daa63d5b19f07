"""``tuner run``: benchmark one configuration on a live engine and write ``run.json``."""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Sequence
from pathlib import Path

from tuner.config import Experiment
from tuner.errors import ResultRelocated, UserError
from tuner.feedback import SILENT, Feedback, task
from tuner.measure import Workbench
from tuner.metrics import flat_metrics
from tuner.plugin.protocol import encode_spec
from tuner.records import RUN_SCHEMA, Repetition, RunRecord, check_destination, new_run_dir, write_json_keeping
from tuner.vllm import environment_record


def aggregate(repetitions: Sequence[Repetition]) -> dict[str, dict[str, float]]:
    """Mean, median, min, max and CV of every flat metric over repetitions."""
    flats = [flat_metrics(r["metrics"]) for r in repetitions]
    summary = {}
    for key in flats[0]:
        values = [f[key] for f in flats if key in f]
        mean = statistics.fmean(values)
        summary[key] = {
            "mean": mean,
            "median": statistics.median(values),
            "min": min(values),
            "max": max(values),
            "cv": statistics.stdev(values) / mean if len(values) > 1 and mean else 0.0,
        }
    return summary


def rss_growth(repetitions: Sequence[Repetition]) -> dict[str, dict[str, float]]:
    """RSS per process at the end of the first and the last repetition: memory traded for GC time shows here."""
    first = {p["process_name"]: p["gc"]["rss_bytes"] for p in repetitions[0]["processes"]}
    last = {p["process_name"]: p["gc"]["rss_bytes"] for p in repetitions[-1]["processes"]}
    return {
        name: {
            "first_rss_mb": first[name] / 2**20,
            "last_rss_mb": last[name] / 2**20,
            "growth_mb": (last[name] - first[name]) / 2**20,
        }
        for name in first
        if name in last
    }


def run_experiment(
    experiment: Experiment, feedback: Feedback = SILENT, output: Path | None = None
) -> tuple[Path, RunRecord]:
    """Start the engine, prove the strategies active, measure the repetitions, write ``run.json`` (or
    ``output``); return its path and the record."""
    if output is not None:
        check_destination(output, "--output")

    def default() -> Path:
        return new_run_dir(experiment.output_dir, experiment.name) / "run.json"

    try:
        path = output or default()
    except OSError as exc:
        why = f"cannot create a run directory: {exc.strerror or exc}"
        raise UserError.single(str(experiment.output_dir), why, "output_dir") from None
    with task(feedback, f"starting vLLM engine ({experiment.engine.get('model', '')})", None):
        bench = Workbench.start(experiment, encode_spec(experiment.strategies))
    session = bench.session
    try:
        bench.switch(experiment.strategies)  # already applied at start: this proves them active everywhere
        repetitions: list[Repetition] = []
        with task(feedback, "repetitions", experiment.measure.repetitions) as reps:
            for index in range(experiment.measure.repetitions):
                rep = bench.repetition(feedback, label=f"repetition {index + 1}")
                repetitions.append(
                    {"index": index, "metrics": rep["metrics"], "processes": rep["processes"], "tail": rep["tail"]}
                )
                reps.advance()
    finally:
        session.close()
    record: RunRecord = {
        "schema": RUN_SCHEMA,
        "kind": "run",
        "experiment": experiment.name,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "config": experiment.model_dump(mode="json"),
        "engine": {
            "args": session.engine_args,  # as resolved for the engine start
            "start_s": session.start_s,
            "mode": session.mode,
            "env": session.env,
        },
        "environment": environment_record(),
        "strategies": experiment.strategies,
        "repetitions": repetitions,
        "summary": aggregate(repetitions),
        "memory": rss_growth(repetitions),
        "workload": bench.workload,
    }
    written, failure = write_json_keeping(path, record, default)
    if failure is not None:
        raise ResultRelocated(f"{failure}: the record is in {written}", str(written))
    return written, record
