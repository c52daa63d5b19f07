"""The load knob ``tuner capacity`` turns: the experiment at a given load, and what that load offers."""

from __future__ import annotations

import math

from tuner.config import Experiment, LoadKnob


def current_load(experiment: Experiment, knob: LoadKnob) -> float:
    """The load the experiment's own workload puts on the engine, in the knob's unit."""
    workload = experiment.workload
    if knob is LoadKnob.SPEED:
        assert workload.dataset is not None  # a speed knob has a trace (Experiment.load_knob)
        return 1.0 / workload.dataset.time_scale
    if knob is LoadKnob.RATE:
        return workload.rate
    assert workload.concurrency is not None
    return float(workload.concurrency)


def at_load(experiment: Experiment, knob: LoadKnob, load: float) -> Experiment:
    """The experiment with its workload at ``load`` (everything else, the requests included, unchanged)."""
    if not (math.isfinite(load) and load > 0):
        raise ValueError(f"a load must be positive and finite, got {load}")
    workload = experiment.workload
    changed: dict[str, object]
    if knob is LoadKnob.SPEED:
        assert workload.dataset is not None
        changed = {"dataset": workload.dataset.model_copy(update={"time_scale": 1.0 / load})}
    elif knob is LoadKnob.RATE:
        changed = {"rate": load}
    else:
        changed = {"concurrency": max(1, round(load))}
    return experiment.model_copy(update={"workload": workload.model_copy(update=changed)})


def offered_rps(offsets: list[float]) -> float:
    """Requests per second over the span of their send times (inf when all leave at once)."""
    span = max(offsets) - min(offsets) if offsets else 0.0
    return (len(offsets) - 1) / span if span > 0 else math.inf
