"""Step-interleaved A/B inside one engine: the analysis on known data, then on the real CPU engine."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from scipy.stats import binomtest

from tests.conftest import TINY_ENGINE
from tuner.config import Experiment
from tuner.confirmation import Candidate, run_confirmation
from tuner.engine import EngineSession
from tuner.interleave import (
    _estimate,
    block_mean,
    comparable_batch_size,
    interleaved_comparison,
    pair_means,
    step_pairs,
    step_ratio,
)
from tuner.measure import Workbench
from tuner.plugin.step_interleaver import StepInterleaver
from tuner.stats import paired_ratio, paired_ratio_of_sums


def block(pair: int, arm: str, dt: list[float], running: list[int], tokens: list[int], settle: float = 0.0) -> dict:
    return {
        "pair": pair,
        "arm": arm,
        "dt": dt,
        "running": running,
        "tokens": tokens,
        "gc_s": [0.0] * len(dt),
        "settle_s": settle,
    }


def test_only_full_batch_decode_steps_are_compared_and_settle_is_charged() -> None:
    decode = [8] * 4
    blocks = [
        block(0, "A", [0.010, 0.010, 0.010, 0.500], [8, 8, 8, 8], [8, 8, 8, 200], settle=0.004),  # one prefill step
        block(0, "B", [0.011] * 4, decode, decode),
        block(1, "B", [0.011, 0.011, 0.011, 0.011], [8, 8, 3, 3], [8, 8, 3, 3]),  # a drain: 2 comparable steps
        block(1, "A", [0.010] * 4, decode, decode),
    ]
    assert comparable_batch_size(blocks) == 8
    assert block_mean(blocks[0], 8, 2) == pytest.approx((0.030 + 0.004) / 3)
    assert block_mean(blocks[2], 8, 3) is None  # too few comparable steps: the pair is dropped
    assert pair_means(blocks, 8, 3) == [(pytest.approx(0.034 / 3), pytest.approx(0.011))]


def test_a_known_ratio_is_recovered_from_blocks() -> None:
    blocks = []
    for pair in range(30):
        wobble = 1 + 0.05 * ((pair * 7) % 5 - 2)  # the host's speed drifts between pairs
        for arm, factor in (("A", 1.0), ("B", 1.03)):
            blocks.append(block(pair, arm, [0.01 * wobble * factor] * 16, [8] * 16, [8] * 16))
    result = _estimate(blocks, 16, 0.01)
    assert result.estimate is not None
    assert result.estimate.ratio == pytest.approx(1.03, rel=1e-6)
    assert result.estimate.verdict == "worse"  # B's steps take longer


# The Wilcoxon gate cannot reach p < 0.05 with fewer than 6 pairs: smaller comparisons could never be significant.
AA_PAIRS_PER_COMPARISON = 6
AA_COMPARISONS = 20


@pytest.fixture(scope="module")
def bench(engine_session: EngineSession) -> Workbench:
    experiment = Experiment.model_validate(
        {
            "name": "interleave-test",
            "engine": TINY_ENGINE,
            "workload": {
                "num_prompts": 16,
                "input_len": {"dist": "fixed", "value": 8},
                "output_len": {"dist": "fixed", "value": 160},
            },
            "measure": {"warmup_prompts": 4},
        }
    )
    workbench = Workbench(engine_session, experiment)
    workbench.warm_up()
    return workbench


@pytest.fixture(scope="module")
def aa_pairs(bench: Workbench) -> list[tuple[float, float]]:
    """One long A/A interleave (identical arms) in short blocks, reused by the A/A tests.

    100 s: the per-pair SD of 8-step blocks has been 0.12-0.15 on this host lately (0.07 a while ago), so 100 s
    (240-400 pairs) gives 99% CIs of +-1.7-2.4%.
    """
    result = interleaved_comparison(
        bench, {}, {}, block_steps=8, budget_s=100, resolution=1e-6, min_pairs=10_000, seed=1
    )
    print(f"A/A: {len(result.pairs)} pairs")
    assert len(result.pairs) >= AA_COMPARISONS * AA_PAIRS_PER_COMPARISON, result.to_dict()
    return result.pairs


@pytest.mark.engine
def test_identical_arms_estimate_zero_effect(aa_pairs: list[tuple[float, float]]) -> None:
    """The identical arm's CI contains 0% and is not blown wide. A 99% CI: a calibrated 95% one misses 0% in 1 run
    of 20. The width bound (+-5%, twice the widest seen from host noise) catches a broken measurement."""
    estimate = paired_ratio(
        [b for _, b in aa_pairs], [a for a, _ in aa_pairs], higher_is_better=False, statistic="geomean", confidence=0.99
    )
    print(f"A/A over {estimate.n} pairs: {estimate.ratio:.4f} [{estimate.ci_low:.4f}, {estimate.ci_high:.4f}]")
    assert estimate.ci_low <= 1.0 <= estimate.ci_high, estimate
    assert estimate.ci_low >= 0.95 and estimate.ci_high <= 1.05, estimate


@pytest.mark.engine
def test_aa_false_positive_rate_is_nominal(aa_pairs: list[tuple[float, float]]) -> None:
    """Split the A/A pairs into >= 20 independent comparisons: their share of "different" verdicts must be
    consistent with at most 5%. A one-sided binomial test at 0.5% (a calibrated analysis fails it < 1 run in 200);
    "at most 1 of 20" would fail 26% of runs of a perfectly calibrated one."""
    size = AA_PAIRS_PER_COMPARISON
    chunks = [aa_pairs[i : i + size] for i in range(0, len(aa_pairs) - size + 1, size)]
    verdicts = [
        paired_ratio([b for _, b in c], [a for a, _ in c], higher_is_better=False, statistic="geomean", seed=i).verdict
        for i, c in enumerate(chunks)
    ]
    different = sum(v in ("better", "worse") for v in verdicts)
    p_value = binomtest(different, len(chunks), 0.05, alternative="greater").pvalue
    print(f"A/A: {different} of {len(chunks)} comparisons called different")
    assert len(chunks) >= AA_COMPARISONS
    assert p_value > 0.005, f"{different} of {len(chunks)} A/A comparisons called different"


STRICT = 0.999
"""The known-size tests check coverage with a 99.9% CI of the same statistic on the same pairs: a calibrated one
misses the known size in 1 run of 1000, where the tool's own 95% CI (printed, for the notes) misses in 1 of 20."""


def assert_covers(pairs: list[tuple[float, float, float, float]], known: float, higher_is_better: bool) -> None:
    """The strict ratio-of-sums CI of (trial steps, seconds, reference steps, seconds) pairs covers ``known``."""
    columns = [[p[i] for p in pairs] for i in range(4)]
    strict = paired_ratio_of_sums(*columns, higher_is_better=higher_is_better, confidence=STRICT)
    print(f"  {STRICT:.1%} CI [{strict.ci_low:.4f}, {strict.ci_high:.4f}] over {strict.n} pairs")
    assert strict.n >= 11, strict  # fewer pairs cannot reach p < 0.001: the strict CI would be unbounded
    assert strict.ci_low <= known <= strict.ci_high, (known, strict)


def runner_delay(ms: float) -> dict[str, dict[str, float]]:
    return {"runner_delay": {"delay_ms": ms}}


@pytest.mark.engine
def test_a_known_host_delay_is_detected_with_its_size(bench: Workbench, aa_pairs: list[tuple[float, float]]) -> None:
    """Both arms busy-wait in the worker before every step, B for 10% of a median step longer, so B's steps are
    A's plus that: the CI of the step-time ratio covers 1 + extra / A's mean step. (The test strategy waits in the
    worker: a pause in EngineCore's scheduler costs more than its length on this 2-core host; see RunnerDelay.)
    A lost delay, a halved or a doubled one fails it."""
    step_s = sorted(a for a, _ in aa_pairs)[len(aa_pairs) // 2]
    base_ms, extra_s = 1.0, 0.10 * step_s  # 10%: clear of 1 at a CI width of 5%
    arms = runner_delay(base_ms), runner_delay(base_ms + extra_s * 1e3)
    result = interleaved_comparison(bench, *arms, budget_s=40, resolution=1e-6, seed=2)  # all 40 s: >= 11 pairs
    estimate = result.estimate
    assert estimate is not None, result.to_dict()
    known_ratio = 1 + extra_s * sum(a[0] for a, _ in result.sums) / sum(a[1] for a, _ in result.sums)
    print(f"known delay: {estimate.ratio:.4f} [{estimate.ci_low:.4f}, {estimate.ci_high:.4f}], known {known_ratio:.4f}")
    assert estimate.verdict == "worse", result.to_dict()
    assert_covers([(b[0], b[1], a[0], a[1]) for a, b in result.sums], known_ratio, higher_is_better=False)


@pytest.mark.engine
def test_a_known_gain_is_confirmed_with_its_size(bench: Workbench) -> None:
    """The confirmation phase on the engine: the reference arm waits in the worker longer before every step than
    the candidate, so the candidate's throughput is higher by a known amount. Screened briefly, then confirmed on
    fresh step pairs by the real decision code (sized for a 0.2% effect in one look, so that it spends its 30 s
    and the strict CI gets enough pairs): the candidate wins, and the confirmation pairs' CI covers the known
    gain."""
    fast = runner_delay(1.0)
    pilot = interleaved_comparison(bench, fast, fast, budget_s=4, resolution=1e-6, seed=3)
    step_s = sorted(a for a, _ in pilot.pairs)[len(pilot.pairs) // 2]
    extra_s = 0.10 * step_s  # the slow arm waits ~10% of a step longer
    slow = runner_delay(1.0 + extra_s * 1e3)
    screened = interleaved_comparison(bench, slow, fast, budget_s=8, resolution=1e-6, seed=4)
    row = {
        "number": 1,
        "state": "COMPLETE",
        "is_baseline": False,
        "aa": False,
        "feasible": True,
        "engine": {},
        "strategies": fast,
        "ratios": {"output_tokens_per_s": step_ratio(screened, "output_tokens_per_s")},
        "step_interleave": screened.to_dict(),
    }
    space = {"runner_delay": [False, True]}
    search = Experiment.model_validate(
        {"name": "confirm", "search": {"space": space, "confirm": {"budget_s": 30, "looks": 1, "min_effect": 0.002}}}
    ).search
    assert search is not None
    measured: list[tuple[float, float, float, float]] = []

    def measure(candidate: Candidate, done: int, wanted: int, left_s: float) -> list[tuple[float, float, float, float]]:
        assert candidate.method == "steps"
        pairs = step_pairs(bench, slow, fast, wanted=wanted, budget_s=left_s + 5, block_steps=16, seed=10 + done)
        measured.extend(pairs)
        return pairs

    record = run_confirmation([row], search, measure)
    decision = record["decision"]
    effect = decision["rows"][0]["confirmation"]
    # The candidate's steps are the slow arm's minus the extra wait: its throughput gain is 1 + extra / its step.
    used = measured[: effect["n"]]
    known_gain = 1 + extra_s * sum(p[0] for p in used) / sum(p[1] for p in used)
    print(f"confirmed {effect['ratio']:.4f} [{effect['ci_low']:.4f}, {effect['ci_high']:.4f}], known {known_gain:.4f}")
    assert decision["winner"] == 1, decision
    assert_covers(used, known_gain, higher_is_better=True)


def arm_share_by_phase(block_steps: int, cycle: int, steps: int) -> list[float]:
    """Share of arm A among the steps at each phase of a batch cycle of ``cycle`` steps."""
    switched: list[dict] = []
    interleaver = StepInterleaver(switched.append, lambda: 0.0)
    interleaver.start({"A": {}, "B": {}}, block_steps=block_steps, seed=11)
    scheduler = SimpleNamespace(running=[0] * 16, _tuner_scheduled_tokens=16)
    engine_core = SimpleNamespace(scheduler=scheduler)
    a_steps = [0] * cycle
    for i in range(steps):
        a_steps[i % cycle] += interleaver.block["arm"] == "A"
        interleaver.around_step(engine_core, lambda: None)
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
