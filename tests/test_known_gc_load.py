"""``known_gc_load``: a known load on the cyclic collector, without an engine.

The load itself is measured in child interpreters (clean GC state, thresholds of their own); the strategy's
switching, counters and patches in this process, with the load recorded or small.
"""

from __future__ import annotations

import gc
import json
import re
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from strategies import ProcessContext, Role, strategy_classes
from strategies import known_gc_load as module
from strategies.known_delay import KnownDelay
from strategies.known_gc_load import CyclicGarbage, KnownGcLoad, make_cyclic_garbage

ROOT = Path(__file__).resolve().parents[1]

# One child per test: each run is (objects, refs, gen0 threshold, steps) in a collector fresh from gc.collect();
# it returns the pauses of the automatic collections in each step and the clock at each step's start (thread CPU
# seconds: not disturbed by other processes' turns on the CPU), the tracked objects before and after (both after a
# full collection), and how many of the load's objects were in an older generation at the end (had survived a
# collection).
CHILD = r"""
import gc, json, sys, time
from strategies.known_gc_load import CyclicGarbage, make_cyclic_garbage

def run(objects, refs, threshold, steps):
    pauses = [[] for _ in range(steps)]
    clock = [0.0] * (steps + 1)
    state = {"step": 0, "start": 0.0}

    def timer(phase, info):
        if phase == "start":
            state["start"] = time.thread_time()
        else:
            pauses[state["step"]].append(time.thread_time() - state["start"])

    make_cyclic_garbage(objects, refs)  # its filler is cached from here on
    gc.collect()
    gc.set_threshold(threshold)
    gc.collect()
    before = len(gc.get_objects())
    gc.callbacks.append(timer)
    for step in range(steps):
        state["step"] = step
        clock[step] = time.thread_time()
        make_cyclic_garbage(objects, refs)
    clock[steps] = time.thread_time()
    gc.callbacks.remove(timer)
    survivors = sum(type(o) is CyclicGarbage for g in (1, 2) for o in gc.get_objects(generation=g))
    gc.collect()
    return {"pauses": pauses, "clock": clock, "before": before, "after": len(gc.get_objects()), "survivors": survivors}

print(json.dumps([run(*args) for args in json.loads(sys.argv[1])]))
"""


def child(*runs: tuple[int, int, int, int]) -> list[dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(runs)], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result: list[dict[str, Any]] = json.loads(done.stdout)
    return result


def collections(run: dict[str, Any]) -> int:
    return sum(len(step) for step in run["pauses"])


def test_collections_come_at_the_load_over_the_gen0_threshold() -> None:
    objects, steps = 700, 400  # 280,000 objects: 400 collections at 700, 100 at 2800 (one more or less: 1%)
    low, high = child((objects, 10, 700, steps), (objects, 10, 2800, steps))
    for run, threshold in ((low, 700), (high, 2800)):
        assert collections(run) == pytest.approx(objects * steps / threshold, rel=0.03)
    assert collections(low) / collections(high) == pytest.approx(4, rel=0.03)  # 1 / threshold


def test_the_load_is_stationary_nothing_survives_and_the_gc_time_per_step_stays() -> None:
    steps = 1000
    (run,) = child((500, 20, 700, steps))  # ~714 collections, ~71 in each tenth
    # No object of the load survives a collection on 3.11; from 3.12, one per collection at most (module docstring).
    assert run["survivors"] <= (0 if sys.version_info < (3, 12) else collections(run))
    # The heap is where it started: a few objects of slack for an interpreter that caches something on the way.
    assert abs(run["after"] - run["before"]) <= 5, (run["before"], run["after"])
    tenth = steps // 10
    first, last = run["pauses"][:tenth], run["pauses"][-tenth:]
    assert abs(sum(map(len, first)) - sum(map(len, last))) <= 2  # as many collections per step at the end

    def gc_share(start: int, end: int) -> float:
        """The collector's share of the steps' CPU time (the load's: allocation and collection)."""
        return sum(map(sum, run["pauses"][start:end])) / (run["clock"][end] - run["clock"][start])

    # Compared as a share, not in seconds: this host's speed changes between the two windows (the median pause
    # swung between 140 and 240 us, by up to 1.7x from the first tenth to the last, in 30 runs), and the share
    # cancels it. In those runs the last tenth's share was within 6% of the first's (55-59% each).
    assert gc_share(steps - tenth, steps) == pytest.approx(gc_share(0, tenth), rel=0.15)
    assert 0.4 < gc_share(0, steps) < 0.75  # collection is about half of what the load costs (the module docstring)


def test_gc_time_grows_with_the_references_each_object_holds() -> None:
    few, many = child((700, 10, 700, 20), (700, 1000, 700, 20))  # 20 collections each
    assert collections(few) == collections(many)
    gc_few, gc_many = (sum(p for step in run["pauses"] for p in step) for run in (few, many))
    assert gc_many > 5 * gc_few, (gc_few, gc_many)  # ~40x here: ~10 ns per reference traversed and freed


@pytest.fixture
def no_automatic_collection() -> Iterator[None]:
    """A gen0 threshold no test reaches (the collector still runs): the load stays in gen0 to be inspected."""
    saved = gc.get_threshold()
    gc.collect()
    gc.set_threshold(10**9)
    try:
        yield
    finally:
        gc.set_threshold(*saved)
        gc.collect()


def ours(generation: int) -> list[Any]:
    return [o for o in gc.get_objects(generation=generation) if type(o) is CyclicGarbage]


@pytest.mark.usefixtures("no_automatic_collection")
def test_each_object_is_a_cycle_of_refs_references_and_garbage_at_once() -> None:
    make_cyclic_garbage(50, 7)
    made = ours(0)
    assert len(made) == 50
    assert all(len(o) == 7 and o[0] is o and o[1:] == [None] * 6 for o in made)
    del made
    gc.collect()
    assert ours(0) == ours(1) == ours(2) == []


LIFETIME_CHILD = r"""
import gc, json, sys, time
from strategies.known_gc_load import CyclicGarbage, LivingLoad

def older_collected():
    return sum(gc.get_stats()[g]["collected"] for g in (1, 2))

def run(threshold, steps=3000, objects=2000, refs=20, lifetime=1):
    load, pauses = LivingLoad(), [0.0]
    state = {}
    def timer(phase, info):
        if phase == "start":
            state["t"] = time.thread_time()
        else:
            pauses[0] += time.thread_time() - state["t"]
    gc.collect(); gc.freeze(); gc.set_threshold(threshold)
    gc.callbacks.append(timer)
    alive, older, before = [], 0, older_collected()
    for step in range(steps):
        load.step(objects, refs, lifetime)
        if step % 500 == 499:
            older += older_collected() - before
            gc.collect()  # what is left is the live load: lifetime x objects
            alive.append(sum(1 for o in gc.get_objects() if type(o) is CyclicGarbage))
            before = older_collected()
    gc.callbacks.remove(timer)
    load.clear(); gc.set_threshold(700); gc.unfreeze(); gc.collect()
    return {"gc_s": pauses[0], "alive": alive, "older": older}

print(json.dumps([run(int(t)) for t in sys.argv[1:]]))
"""


def test_objects_that_live_some_steps_make_a_larger_threshold_do_less_collecting() -> None:
    """``lifetime_steps``: 2,000 objects a step alive for one step. At threshold 700 a collection comes every 0.35
    steps and finds every young object alive, so each is traced again by an older generation; at 8,000 (every 4
    steps) most have died young and are freed by gen0 alone. So the collector's total work falls, not only its
    rate: in a child interpreter, less GC time and fewer objects freed by the older generations. The live load
    stays one step's objects throughout (stationary)."""
    done = subprocess.run(
        [sys.executable, "-c", LIFETIME_CHILD, "700", "8000"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    low, high = json.loads(done.stdout)
    assert high["older"] < 0.5 * low["older"], (low["older"], high["older"])
    assert high["gc_s"] < 0.9 * low["gc_s"], (low["gc_s"], high["gc_s"])
    assert low["alive"] == high["alive"] == [2000] * 6  # after each full collection: the live step only


def test_a_living_load_keeps_each_sides_objects_its_lifetime_and_a_revert_drops_them() -> None:
    strategy = applied(KnownGcLoad(), engine_core_objects=3, refs_per_object=2, lifetime_steps=2)
    for _ in range(5):
        strategy.engine_core_step()
    assert [len(batch) for batch in strategy.living["engine_core"].alive] == [3, 3]
    assert not strategy.living["worker"].alive and strategy.counters["engine_core_objects"] == 15
    strategy.revert(ProcessContext(role=Role.ENGINE_CORE))
    assert not strategy.living["engine_core"].alive


def test_params_are_typed_and_bounded() -> None:
    assert KnownGcLoad.resolve_params({}) == {
        "engine_core_objects": 0,
        "worker_objects": 0,
        "refs_per_object": 100,
        "lifetime_steps": 0,
    }
    assert KnownGcLoad.resolve_params({"worker_objects": 1_000_000, "refs_per_object": 1})["worker_objects"] == 10**6
    refused: list[tuple[dict[str, Any], str]] = [
        ({"engine_core_objects": -1}, "engine_core_objects must be >= 0"),
        ({"worker_objects": 1_000_001}, "worker_objects must be <= 1e+06"),
        ({"refs_per_object": 0}, "refs_per_object must be >= 1"),
        ({"refs_per_object": 100_001}, "refs_per_object must be <= 100000"),
        ({"engine_core_objects": 2.5}, "engine_core_objects must be an integer"),
        ({"worker_objects": True}, "worker_objects must be a number"),
        ({"objects_per_step": 10}, "has no parameter objects_per_step"),
    ]
    for bad, message in refused:
        with pytest.raises(ValueError, match=re.escape(message)):
            KnownGcLoad.resolve_params(bad)


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Each load the strategy makes, recorded instead of made."""
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(module, "make_cyclic_garbage", lambda objects, refs: calls.append((objects, refs)))
    return calls


def applied(strategy: KnownGcLoad, **given: int) -> KnownGcLoad:
    strategy.apply(ProcessContext(role=Role.ENGINE_CORE), KnownGcLoad.resolve_params(given))
    return strategy


def step(strategy: KnownGcLoad, *sides: str) -> None:
    """What the patched methods do on each batch of ``sides`` while the strategy is applied."""
    for side in sides:
        (strategy.engine_core_step if side == "engine_core" else strategy.worker_step)()


def test_apply_and_revert_switch_the_load_and_its_counters(made: list[tuple[int, int]]) -> None:
    strategy = KnownGcLoad()
    step(strategy, "engine_core", "worker")  # installed, not applied: nothing
    assert made == [] and strategy.counters == {}

    applied(strategy, engine_core_objects=3, worker_objects=5, refs_per_object=7)
    step(strategy, "engine_core", "worker", "worker")
    assert made == [(3, 7), (5, 7), (5, 7)]
    counted = {"engine_core_steps": 1, "engine_core_objects": 3, "worker_steps": 2, "worker_objects": 10}
    assert strategy.counters == counted

    strategy.revert(ProcessContext(role=Role.ENGINE_CORE))
    step(strategy, "engine_core", "worker")
    assert len(made) == 3 and strategy.counters == counted


def test_a_side_without_load_still_proves_its_patch_ran(made: list[tuple[int, int]]) -> None:
    """As known_delay at 0 ms: a process whose side makes nothing moves a counter all the same (the tuner
    requires one to move in every process where the strategy is applied)."""
    strategy = applied(KnownGcLoad(), worker_objects=5)
    strategy.engine_core_step()
    assert made == [] and strategy.counters == {"engine_core_steps": 1}


def test_no_load_where_the_collector_does_not_run(made: list[tuple[int, int]]) -> None:
    strategy = applied(KnownGcLoad(), engine_core_objects=3)
    ctx = ProcessContext(role=Role.ENGINE_CORE)
    assert strategy.verify(ctx) is None
    saved = gc.get_threshold()
    try:
        gc.disable()
        strategy.engine_core_step()
        assert "the collector does not run here (enabled: False" in (strategy.verify(ctx) or "")
        gc.enable()
        gc.set_threshold(0)
        strategy.engine_core_step()
        assert "thresholds (0, " in (strategy.verify(ctx) or "")
    finally:
        gc.enable()
        gc.set_threshold(*saved)
    assert made == [] and strategy.counters == {}  # nothing would have freed it, and nothing claims it ran


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """The two classes the strategy patches, as modules vLLM would provide (vLLM itself is not imported)."""

    class Scheduler:
        def update_from_output(self, scheduler_output: Any, model_runner_output: Any) -> Any:
            return ("updated", scheduler_output, model_runner_output)

    class Worker:
        def execute_model(self, scheduler_output: Any) -> Any:
            return ("executed", scheduler_output)

    for name, cls in (("vllm.v1.core.sched.scheduler", Scheduler), ("vllm.v1.worker.gpu_worker", Worker)):
        fake = types.ModuleType(name)
        setattr(fake, cls.__name__, cls)
        monkeypatch.setitem(sys.modules, name, fake)
    return Scheduler, Worker


def test_install_wraps_each_method_once_beside_known_delay(
    fake_vllm: tuple[Any, Any], made: list[tuple[int, int]]
) -> None:
    Scheduler, Worker = fake_vllm
    load, delay = KnownGcLoad(), KnownDelay()
    load.install()
    update, execute_model = Scheduler.update_from_output, Worker.execute_model
    load.install()  # idempotent
    assert (Scheduler.update_from_output, Worker.execute_model) == (update, execute_model)
    delay.install()  # wraps the load's wrappers; each keeps its own flag
    applied(load, engine_core_objects=4, worker_objects=2, refs_per_object=3)
    delay.apply(ProcessContext(role=Role.ENGINE_CORE), KnownDelay.resolve_params({}))

    assert Scheduler().update_from_output("out", "runner") == ("updated", "out", "runner")
    assert Worker().execute_model("out") == ("executed", "out")
    assert made == [(4, 3), (2, 3)]
    assert load.counters == {"engine_core_steps": 1, "engine_core_objects": 4, "worker_steps": 1, "worker_objects": 2}
    assert delay.counters == {"engine_core_steps": 1, "worker_steps": 1}

    load.revert(ProcessContext(role=Role.ENGINE_CORE))
    Scheduler().update_from_output("out", "runner")
    assert len(made) == 2 and load.counters["engine_core_steps"] == 1
    assert delay.counters["engine_core_steps"] == 2


def test_it_is_a_builtin_switched_per_step_that_does_not_pace_the_collector() -> None:
    cls = strategy_classes()["known_gc_load"]
    assert cls is KnownGcLoad
    assert cls.switchable and cls.step_switchable and not cls.paces_gc
    assert cls.roles == {Role.ENGINE_CORE, Role.WORKER}
    assert cls.requires == KnownDelay.requires  # the same two methods, checked against every release
    assert cls.upstream.default_since is None
