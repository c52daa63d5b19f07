"""The host's load around a run (``tuner.metrics.host_load``): the arithmetic, a real busy child seen, the note a
capacity record carries, and older records read without it."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tuner import interrupts
from tuner.metrics import host_load
from tuner.metrics.host_load import SATURATED, WAITED, CpuSample, cpu_sample, host_record, run_load, tool_waited_s
from tuner.records.capacity import CAPACITY_SCHEMA, load_capacity

ARMS = ("reference", "configuration")


def test_a_runs_load_is_the_busy_share_of_the_host_the_trees_cpus_and_the_tools_wait_per_second() -> None:
    before = CpuSample(wall=10.0, busy_s=100.0, total_s=400.0, tree_s=50.0, waited_s=1.0, collected_s=0.5)
    after = CpuSample(wall=12.0, busy_s=103.0, total_s=404.0, tree_s=53.0, waited_s=1.2, collected_s=0.75)  # 3 of 4
    assert run_load(before, after) == pytest.approx(
        {"host_busy": 0.75, "tree_cpus": 1.5, "other_cpus": 0.0, "tool_wait": 0.1, "tool_gc_s": 0.25}
    )
    ended = CpuSample(wall=12.0, busy_s=103.0, total_s=404.0, tree_s=40.0, waited_s=0.5, collected_s=0.5)  # child gone
    assert run_load(before, ended)["tree_cpus"] == 0.0 and run_load(before, ended)["tool_wait"] == 0.0
    shared = CpuSample(wall=12.0, busy_s=107.0, total_s=408.0, tree_s=53.0, waited_s=None, collected_s=0.5)  # 4 CPUs
    assert run_load(before, shared) == {
        "host_busy": 0.875, "tree_cpus": 1.5, "other_cpus": 2.0, "tool_wait": None, "tool_gc_s": 0.0
    }  # fmt: skip


def test_a_collection_of_a_large_heap_in_the_tools_process_shows_as_its_collector_time() -> None:
    """500,000 objects in reference cycles, collected whole between two samples: at least as long as the collection
    took by the clock around it, less a millisecond of the clock's own grain; with nothing collected, nothing."""
    cpu_sample()  # the collector's timer is in place from here
    timer = host_load._COLLECTOR._on_collection
    assert timer in gc.callbacks and timer.__func__.__code__ in interrupts._hook_codes()  # a signal inside: not lost
    cycles = [[] for _ in range(500_000)]
    for cycle in cycles:
        cycle.append(cycle)
    del cycles, cycle
    before = cpu_sample()
    began = time.perf_counter()
    gc.collect()
    took = time.perf_counter() - began
    collected = run_load(before, cpu_sample())["tool_gc_s"]
    assert took - 1e-3 <= collected <= took, (collected, took)
    gc.disable()
    try:
        before = cpu_sample()
        quiet = run_load(before, cpu_sample())["tool_gc_s"]
    finally:
        gc.enable()
    assert quiet == 0.0


@pytest.mark.skipif(tool_waited_s() is None, reason="the platform does not say how long threads wait for a CPU")
def test_the_tools_thread_sharing_its_cpu_with_a_busy_child_shows_its_wait() -> None:
    """This process and a child spinning, both held to one CPU: each runs about half the time, so over 1 s of
    spinning here the thread waits for the CPU at least a tenth of it (about half, when the scheduler shares it
    fairly); spinning alone, on a CPU of its own, far less."""
    cpu = min(os.sched_getaffinity(0))
    held = os.sched_getaffinity(0)
    child = subprocess.Popen(
        [sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{cpu}}})\n" + SPIN.format(s=30.0)]
    )
    os.sched_setaffinity(0, {cpu})
    try:
        time.sleep(0.3)  # the child is spinning
        before = cpu_sample()
        _spin_here(1.0)
        shared = run_load(before, cpu_sample())
    finally:
        os.sched_setaffinity(0, held)
        child.kill()
        child.wait()
    assert shared["tool_wait"] is not None and shared["tool_wait"] >= WAITED, shared


def test_a_kernel_whose_schedstat_files_are_empty_says_nothing_rather_than_no_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("tuner.metrics.host_load.Path.read_text", lambda self, *a, **k: "")
    assert tool_waited_s() is None


def _spin_here(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


SPIN = "import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass"


def test_a_busy_child_shows_in_the_trees_cpus_while_it_runs_and_after_it_ended() -> None:
    """A child spinning uses about one CPU: the tree's CPUs per second reach at least half of one while it still
    runs (a live descendant, as the engine's processes are) and over a span in which it ended and was waited for."""
    before = cpu_sample()
    child = subprocess.Popen([sys.executable, "-c", SPIN.format(s=3.0)])
    try:
        time.sleep(1.0)
        live = run_load(before, cpu_sample())
    finally:
        child.kill()
        child.wait()
    assert live["tree_cpus"] >= 0.5, live
    assert live["host_busy"] > 0.0, live
    before = cpu_sample()
    subprocess.run([sys.executable, "-c", SPIN.format(s=1.0)], check=True)
    ended = run_load(before, cpu_sample())
    assert ended["tree_cpus"] >= 0.5, ended


def test_a_busy_process_outside_the_tree_shows_in_the_other_cpus() -> None:
    """A process the tool started but left (its launcher exited, so it is no descendant) spinning for 3 s: while it
    runs, other processes use at least half a CPU and the tool's tree (this test, sleeping) less."""
    orphan = "import os, sys\nif os.fork():\n    sys.exit(0)\n" + SPIN.format(s=3.0)
    subprocess.run([sys.executable, "-c", orphan], check=True)
    time.sleep(0.3)  # the orphan is spinning
    before = cpu_sample()
    time.sleep(1.0)
    load = run_load(before, cpu_sample())
    assert load["other_cpus"] >= 0.5 and load["tree_cpus"] < 0.5, load


def _runs(busy: list[float], waits: list[float] | None = None) -> list[dict[str, float]]:
    waited = [{} for _ in busy] if waits is None else [{"tool_wait": w} for w in waits]
    run = {"attainment": 1.0, "wall_s": 1.0, "tree_cpus": 1.0}
    return [{**run, "host_busy": b, **w} for b, w in zip(busy, waited, strict=True)]


def test_a_saturated_host_whose_tool_never_waited_for_a_cpu_needs_no_note() -> None:
    """vLLM's processes spinning while they wait keep a small host busy without harm: what reads the latencies is
    the tool's clock."""
    record = host_record({arm: _runs([0.99] * 4, [0.02, 0.05, 0.01, 0.099]) for arm in ARMS}, ARMS)
    assert record["saturated"] == {"reference": 4, "configuration": 4}
    assert record["waited"] == {"reference": 0, "configuration": 0}
    assert record["note"] is None and record["bias_p"] is None and record["tool_wait_median"] == 0.05


def test_runs_whose_tool_waited_are_said_alike_in_both_arms_and_a_bias_where_one_arm_had_them() -> None:
    alike = host_record({arm: _runs([0.99] * 4, [0.3, 0.0, 0.1, 0.0]) for arm in ARMS}, ARMS)
    assert alike["waited"] == {"reference": 2, "configuration": 2} and alike["bias_p"] == pytest.approx(1.0)
    assert alike["note"] is not None and "clock waited" in alike["note"] and "in 4 of 8 runs" in alike["note"]
    assert "biased" not in alike["note"]
    loads = {"reference": _runs([0.99] * 10, [0.0] * 10), "configuration": _runs([0.99] * 10, [0.2] * 8 + [0.0] * 2)}
    one = host_record(loads, ARMS)
    assert one["bias_p"] is not None and one["bias_p"] < 0.001  # Fisher: 8 of 10 against 0 of 10
    assert one["note"] is not None and "biased against it" in one["note"] and "configuration's" in one["note"]


def test_no_saturated_run_no_note() -> None:
    record = host_record({arm: _runs([0.5, 0.6, 0.7]) for arm in ARMS}, ARMS)
    assert record["note"] is None and record["bias_p"] is None
    assert record["saturated"] == {"reference": 0, "configuration": 0} and record["busy_median"] == 0.6


def test_saturation_alike_in_both_arms_is_said_without_a_bias() -> None:
    busy = [0.99, 0.5, 0.98, 0.4]
    record = host_record({arm: _runs(busy) for arm in ARMS}, ARMS)
    assert record["saturated"] == {"reference": 2, "configuration": 2}
    assert record["note"] is not None and "in 4 of 8 runs" in record["note"] and "biased" not in record["note"]
    assert record["bias_p"] == pytest.approx(1.0)


def test_saturation_on_one_arms_runs_is_called_a_possible_bias_against_it() -> None:
    """8 of 10 configuration runs saturated against 0 of 10 reference runs: Fisher's exact p = 0.0007."""
    loads = {"reference": _runs([0.5] * 10), "configuration": _runs([SATURATED] * 8 + [0.5] * 2)}
    record = host_record(loads, ARMS)
    assert record["bias_p"] is not None and record["bias_p"] < 0.001
    assert record["note"] is not None and "biased against it" in record["note"] and "configuration's" in record["note"]


def test_runs_recorded_before_the_host_was_sampled_are_left_out() -> None:
    loads = {arm: [{"attainment": 1.0, "wall_s": 1.0}, *_runs([0.97])] for arm in ARMS}
    assert host_record(loads, ARMS)["runs"] == {"reference": 1, "configuration": 1}


def test_an_older_capacity_record_reads_with_no_host(tmp_path: Path) -> None:
    path = tmp_path / "capacity.json"
    path.write_text(json.dumps({"schema": CAPACITY_SCHEMA, "levels": []}))
    assert load_capacity(path)["host"] is None
