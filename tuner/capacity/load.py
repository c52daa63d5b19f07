"""The load knob ``tuner capacity`` turns: the experiment at a given load, what that load offers, and the load from
which turning it further no longer loads the engine more."""

from __future__ import annotations

import math

from tuner.config import Experiment, LoadKnob
from tuner.records import SearchRecord


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


SENT_WITHIN = 0.1
"""A run that sends every request within this share of its wall time cannot be loaded more by a higher load."""


def unloadable(knob: LoadKnob, load: float, span_s: float, wall_s: float, requests: int) -> bool:
    """Whether raising the knob past ``load`` would no longer load the engine more, read from a run at ``load``
    whose requests were sent over ``span_s`` and which took ``wall_s``: a concurrency of at least the ``requests``
    (all in flight at once), or a rate or speed at which every request was sent within the first
    :data:`SENT_WITHIN` of the run. A 30-request trace window met the SLO in both arms from 1x to 64x its recorded
    speed, each load doubled until the budget ran out, while from ~8x on every request arrived at once."""
    if knob is LoadKnob.CONCURRENCY:
        return load >= requests
    return span_s <= SENT_WITHIN * wall_s


def unloadable_words(knob: LoadKnob, requests: int) -> str:
    """Why :func:`unloadable` holds, in words."""
    if knob is LoadKnob.CONCURRENCY:
        return f"all {requests} requests were in flight at once"
    return f"every one of the {requests} requests was sent within the first {100 * SENT_WITHIN:g}% of a run"


def unloadable_note(search: SearchRecord, highest: float, requests: int, arms: list[str]) -> str | None:
    """What the sentence adds where ``arms`` met the SLO at every load probed up to ``highest``, the load at which
    the knob could not load the engine further (None where it could)."""
    limit = search["unloadable_from"]
    if limit is None or not arms or highest < limit:
        return None
    knob = LoadKnob(search["knob"])
    other = "a rate or a trace's speed" if knob is LoadKnob.CONCURRENCY else "the concurrency knob"
    return (
        f"The {' and the '.join(arms)} met the SLO at every load up to {highest:.4g} {search['unit']}, where "
        f"{unloadable_words(knob, requests)}: a higher load would not load the engine more. Give the search more "
        f"requests (workload.num_prompts, or a longer trace window) or use {other}."
    )


def saturation_load(load: float, span_s: float, wall_s: float) -> float:
    """The load at which the requests' sends span what the engine took to serve all of them at once (``wall_s``),
    read from their send span ``span_s`` at ``load`` (send times scale as 1 / load): about where the engine stops
    keeping up, so where a latency SLO's knee lies at or below."""
    return load * span_s / wall_s if span_s > 0 and wall_s > 0 else load
