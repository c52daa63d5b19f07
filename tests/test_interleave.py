"""Step-interleaved A/B inside one engine, on known data: which steps are compared, the arms each batch carries, the
washout, the phases of a periodic batch (on the real CPU engine: ``tests/engine/test_interleave_engine.py``)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from tuner.measure.interleave import LEAST_PAIRS, OVERRUN_S, Counting, _goes_on
from tuner.measure.step_sums import (
    ANY_WORK,
    block_mean,
    block_sum,
    comparable_batch_size,
    compared_steps,
    least_comparable,
    pair_means,
)
from tuner.plugin.protocol import STEP_TAG_ATTRIBUTE, Arm, BlockRecord, StepTag, interleave_start
from tuner.plugin.step_interleaver import StepArms, StepInterleaver


def block(
    pair: int,
    arm: Arm,
    dt: list[float],
    running: list[int],
    tokens: list[int],
    washout: int = 0,
    gc_s: list[float] | None = None,
) -> BlockRecord:
    return {
        "pair": pair,
        "arm": arm,
        "t0": [float(i) for i in range(len(dt))],
        "dt": dt,
        "running": running,
        "tokens": tokens,
        "gc_s": gc_s or [0.0] * len(dt),
        "allocated": 0,
        "washout": washout,
    }


def test_only_full_batch_decode_steps_are_compared() -> None:
    decode = [8] * 4
    blocks = [
        block(0, "A", [0.010, 0.010, 0.010, 0.500], [8, 8, 8, 8], [8, 8, 8, 200]),  # one prefill step
        block(0, "B", [0.011] * 4, decode, decode),
        block(1, "B", [0.011, 0.011, 0.011, 0.011], [8, 8, 3, 3], [8, 8, 3, 3]),  # a drain: 2 comparable steps
        block(1, "A", [0.010] * 4, decode, decode),
    ]
    assert comparable_batch_size(blocks) == 8
    assert block_mean(blocks[0], 8, 2) == pytest.approx(0.010)
    assert block_mean(blocks[2], 8, 3) is None  # too few comparable steps: the pair is dropped
    assert pair_means(blocks, 8, 3) == [(pytest.approx(0.010), pytest.approx(0.011))]


def test_the_mutator_counts_each_step_without_its_gc() -> None:
    """A GC-pacing comparison's mutator: the same steps, each without the GC seconds on its critical path."""
    paused = block(0, "A", [0.010, 0.014, 0.010], [8] * 3, [8] * 3, gc_s=[0.0, 0.004, 0.001])
    assert block_sum(paused, 8, 1) == (3, pytest.approx(0.034))
    assert block_sum(paused, 8, 1, exclude_gc=True) == (3, pytest.approx(0.029))


def test_a_known_ratio_is_recovered_from_blocks() -> None:
    blocks = []
    for pair in range(30):
        wobble = 1 + 0.05 * ((pair * 7) % 5 - 2)  # the host's speed drifts between pairs
        arms: tuple[tuple[Arm, float], ...] = (("A", 1.0), ("B", 1.03))
        for arm, factor in arms:
            blocks.append(block(pair, arm, [0.01 * wobble * factor] * 16, [8] * 16, [8] * 16))
    result = Counting(16).result(blocks, 0.01)
    assert result.estimate is not None
    assert result.estimate.ratio == pytest.approx(1.03, rel=1e-6)
    assert result.estimate.verdict == "worse"  # B's steps take longer


def test_driven_by_arrivals_every_step_that_did_work_is_compared() -> None:
    """Offline, only pure decode steps at the most common batch size count; driven by arrivals, a step of any mix
    counts unless it scheduled nothing."""
    dts, running, tokens = [0.01, 0.02, 0.03, 0.04], [2, 3, 3, 0], [2, 40, 3, 0]
    blocks = [block(0, arm, [dt * factor for dt in dts], running, tokens) for arm, factor in (("A", 1.0), ("B", 1.1))]
    assert compared_steps(blocks[0], ANY_WORK) == [(0.01, 0.0), (0.02, 0.0), (0.03, 0.0)]
    assert compared_steps(blocks[0], 3) == [(0.03, 0.0)]  # offline: pure decode at the common size only
    driven = Counting(1, arrivals=True).result(blocks, None)
    assert driven.batch_size == ANY_WORK and driven.sums == [((3, pytest.approx(0.06)), (3, pytest.approx(0.066)))]


def test_washout_steps_run_under_the_new_arm_but_are_not_compared() -> None:
    """With a batch queue the first step of a block finishes the other arm's batch: it is recorded, not compared."""
    blocks = [
        block(0, "A", [0.050, 0.010, 0.010], [8] * 3, [8] * 3, washout=1),  # its first step: B's last batch
        block(0, "B", [0.010, 0.020, 0.020], [8] * 3, [8] * 3, washout=1),
    ]
    assert pair_means(blocks, 8, 1) == [(pytest.approx(0.010), pytest.approx(0.020))]


def test_least_comparable_steps_allow_one_step_blocks() -> None:
    assert [least_comparable(k) for k in (1, 2, 3, 4, 16)] == [1, 1, 2, 2, 8]


class FakeScheduler:
    def __init__(self, running: int, tokens: int) -> None:
        self.running = [0] * running
        self.output = SimpleNamespace(total_num_scheduled_tokens=tokens)


def step_once(interleaver: StepInterleaver, scheduler: FakeScheduler) -> Any:
    """One engine step as the hooks drive it: schedule (tagged), then the step's time is recorded."""

    def step() -> Any:
        interleaver.tag(scheduler.output)
        return getattr(scheduler.output, STEP_TAG_ATTRIBUTE, None)

    return interleaver.around_step(SimpleNamespace(scheduler=scheduler), step)


def test_each_batch_carries_its_blocks_arm() -> None:
    switched: list[dict[str, Any]] = []
    step_arms = StepArms(switched.append, lambda: 0)
    interleaver = StepInterleaver(step_arms, lambda: 0.0)
    a, b = {"known_delay": {"worker_ms": 0.0}}, {"known_delay": {"worker_ms": 1.0}}
    step_arms.start(a, b)  # as every engine process does on interleave_start
    interleaver.start(interleave_start(a, b, block_steps=2, seed=0), batch_queue=False)
    scheduler = FakeScheduler(8, 8)
    tags = [step_once(interleaver, scheduler) for _ in range(8)]
    arms = [t.arm for t in tags]
    assert all(arms[i] == arms[i + 1] for i in range(0, 8, 2))  # blocks of two batches
    assert all({arms[i], arms[i + 2]} == {"A", "B"} for i in range(0, 8, 4))  # each pair holds both arms
    assert switched[0] == (a if arms[0] == "A" else b)  # EngineCore switched itself before the first batch
    idle = SimpleNamespace(total_num_scheduled_tokens=0)
    interleaver.around_step(SimpleNamespace(scheduler=scheduler), lambda: interleaver.tag(idle))
    blocks = interleaver.drain()["blocks"]
    assert [len(b["dt"]) for b in blocks] == [2] * 4  # an idle poll is not a step of any block


def test_each_block_counts_the_allocations_of_its_steps_and_each_arm_its_own() -> None:
    """Every step allocates 10 GC-tracked objects under A and 30 under B (net), 5 more between steps: each block
    holds what was allocated from its first step's start to its last's end, and the process's arms book every
    allocation to the arm in force when it was made (what paces the collector under each arm)."""
    allocated = [0]
    arms = StepArms(lambda _: None, lambda: allocated[0])
    interleaver = StepInterleaver(arms, lambda: 0.0)
    arms.start({}, {"x": {}})
    interleaver.start(interleave_start({}, {"x": {}}, block_steps=4, seed=0), batch_queue=False)
    scheduler = FakeScheduler(8, 8)
    for _ in range(16):
        arm = interleaver.block["arm"]

        def step(arm: str = arm) -> None:
            interleaver.tag(scheduler.output)
            allocated[0] += 10 if arm == "A" else 30

        interleaver.around_step(SimpleNamespace(scheduler=scheduler), step)
        allocated[0] += 5  # between steps: the busy loop's own
    blocks = interleaver.drain()["blocks"]
    assert {b["arm"]: b["allocated"] for b in blocks} == {"A": 4 * 10 + 3 * 5, "B": 4 * 30 + 3 * 5}
    arms.stop()
    booked = {arm: counts[0] for arm, counts in arms.allocations.items()}
    assert sum(booked.values()) == allocated[0] == 16 * 5 + 8 * 10 + 8 * 30  # every allocation, to one arm
    # Each arm's steps and the gaps while it was in force: the first gap after a block's last step belongs to the
    # arm the next block opened, so each total is within one gap of four per block.
    assert abs(booked["A"] - 2 * 4 * (10 + 5)) <= 5 and abs(booked["B"] - 2 * 4 * (30 + 5)) <= 5


def test_a_worker_applies_each_batchs_arm_and_counts_its_batches() -> None:
    switched: list[dict[str, Any]] = []
    arms = StepArms(switched.append, lambda: 0)
    arms.start({}, {"x": {}})
    arms.batch(StepTag("B"))
    arms.batch(StepTag("B"))
    assert switched == [{"x": {}}]  # one switch for the block, none for its second batch
    arms.batch(StepTag("A"))
    arms.stop()
    assert switched == [{"x": {}}, {}, {}]  # back to the reference, then to nothing in force
    assert arms.allocations == {"A": [0, 1], "B": [0, 2]}


def test_with_a_batch_queue_each_block_gets_one_washout_step() -> None:
    interleaver = StepInterleaver(StepArms(lambda _: None, lambda: 0), lambda: 0.0)
    interleaver.start(interleave_start({}, {}, block_steps=3, seed=0), batch_queue=True)
    scheduler = FakeScheduler(8, 8)
    for _ in range(16):
        step_once(interleaver, scheduler)
    blocks = interleaver.drain()["blocks"]
    assert blocks and all(len(b["dt"]) == 4 and b["washout"] == 1 for b in blocks)


def arm_share_by_phase(block_steps: int, cycle: int, steps: int) -> list[float]:
    """Share of arm A among the steps at each phase of a batch cycle of ``cycle`` steps."""
    interleaver = StepInterleaver(StepArms(lambda _: None, lambda: 0), lambda: 0.0)
    interleaver.start(interleave_start({}, {}, block_steps=block_steps, seed=11), batch_queue=False)
    scheduler = FakeScheduler(16, 16)
    a_steps = [0] * cycle
    for i in range(steps):
        a_steps[i % cycle] += step_once(interleaver, scheduler).arm == "A"
    return [a / (steps / cycle) for a in a_steps]


def test_arms_spread_over_every_phase_of_a_periodic_batch() -> None:
    """An offline batch of 160 steps is five mirrored periods of 8-step blocks: with fixed blocks an arm would sit
    at the same phases of every batch (shares of 0 or 1), and step cost changes with the context through a batch.
    With a random order per pair each phase sees both arms about equally (400 batches, seed 11: shares
    0.46-0.54, SD 0.022, so 0.25-0.75 is over 10 SD away; mirrored order fails it)."""
    shares = arm_share_by_phase(block_steps=8, cycle=160, steps=160 * 400)
    print(f"arm A share by phase: {min(shares):.3f}-{max(shares):.3f}")
    assert all(0.25 <= share <= 0.75 for share in shares), shares
    assert abs(sum(shares) / len(shares) - 0.5) < 0.05


def test_a_comparison_runs_past_its_budget_until_it_holds_the_pairs_an_estimate_needs() -> None:
    """A GC pilot's 0.8 s share held no block of its second arm on a slow engine (32-step blocks at 20 ms): it ran on
    past its budget until both arms had a pair, else ``check_ran`` blamed the second arm's strategies for not
    running. It stops at its budget once it holds them, and past the overrun whatever it holds."""
    assert _goes_on(0.5, 0.8, 0)  # within the budget
    assert not _goes_on(0.9, 0.8, LEAST_PAIRS)  # budget spent, an estimate possible
    assert _goes_on(0.9, 0.8, LEAST_PAIRS - 1)  # budget spent, no estimate yet
    assert _goes_on(0.9, 0.0, 0)  # a part left no budget (the mutator after a long pilot): still two pairs
    assert not _goes_on(0.8 + OVERRUN_S, 0.8, 0)  # an engine that makes no pairs is not waited for forever
