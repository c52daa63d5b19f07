"""Step-level interleaving on the engine: switching costs little, an A/A is called at its nominal rate, known host
delays are measured with their size on each side, and rare long pauses make a faster trial worse."""

from __future__ import annotations

import pytest
from scipy.stats import binomtest

from tests.support import TINY_ENGINE
from tuner.config import Experiment
from tuner.engine.session import EngineSession
from tuner.measure.interleave import InterleaveResult, interleaved_comparison, step_estimate
from tuner.measure.workbench import Workbench
from tuner.plugin.protocol import StrategySet
from tuner.stats import least_pairs, paired_ratio_of_sums

# The exact sign-flip test cannot reach p < 0.05 with fewer than 6 pairs: fewer could never be significant.
SWITCH_ONLY: StrategySet = {"known_delay": {}}
"""An arm that differs from the reference only by a zero-length known delay: every engine process switches per
batch (its counters prove it), nothing else changes. The A/A of the pipeline's both sides."""

AA_PAIRS_PER_COMPARISON = 6


AA_COMPARISONS = 20


AA_PAIRS = 1_100  # the A/A fixture's least pairs: a 99.9% CI of about +-0.9% at this host's usual step noise


AA_WIDTH = 0.012  # the A/A fixture's 95% CI width to reach


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
def aa(bench: Workbench) -> InterleaveResult:
    """One long A/A interleave at one-step blocks (the default grain) with both engine processes switching, reused
    by the A/A tests: at least 1,100 pairs (>= 150 comparisons of 6 pairs), and on until its 95% CI is no wider than
    1.2% (a 99.9% CI of about +-1%), up to 150 s: 25 s on a quiet host (step log SD ~0.07); a noisy spell (log SD
    0.19 seen in CI, 1,178 pairs then gave a 99.9% CI of +-1.8%) takes about 90 s."""
    result = interleaved_comparison(
        bench, {}, SWITCH_ONLY, block_steps=1, budget_s=150, min_effect=AA_WIDTH, min_pairs=AA_PAIRS, seed=1
    )
    print(f"A/A: {len(result.sums)} pairs")
    assert len(result.sums) >= AA_COMPARISONS * AA_PAIRS_PER_COMPARISON, result.to_dict()
    return result


@pytest.mark.engine
def test_switching_every_engine_process_every_step_costs_little(aa: InterleaveResult) -> None:
    """The arms differ only in a zero-length known delay, switched in EngineCore and the worker before every batch:
    the step-time ratio's 99.9% CI lies within +-2% (a switch that cost a measurable share of a step, or a broken
    attribution, fails it). Measured here: +0.33% [-0.45%, +1.09%] and +0.51% [+0.16%, +0.90%] (99%) over ~1900
    pairs: switching every step is not free on this host, and the calibration's A/A at each block length
    (`tuner calibrate`) is what keeps a block length whose switching shows."""
    estimate = aa.estimate_at(0.999)
    assert estimate is not None
    print(f"A/A over {estimate.n} pairs: {estimate.ratio:.4f} [{estimate.ci_low:.4f}, {estimate.ci_high:.4f}]")
    assert estimate.ci_low >= 0.98 and estimate.ci_high <= 1.02, estimate


@pytest.mark.engine
def test_aa_false_positive_rate_is_nominal(aa: InterleaveResult) -> None:
    """Split the A/A pairs into >= 20 independent comparisons of the tool's own statistic (ratio of sums, sign-flip
    test at 95%): their share of "different" verdicts must be consistent with at most 5%. A one-sided binomial
    test at 0.5% (a calibrated analysis fails it < 1 run in 200); "at most 1 of 20" would fail 26% of runs of a
    perfectly calibrated one."""
    size = AA_PAIRS_PER_COMPARISON
    chunks = [aa.sums[i : i + size] for i in range(0, len(aa.sums) - size + 1, size)]
    estimates = [InterleaveResult(estimate=None, sums=chunk).estimate_at(0.95) for chunk in chunks]
    different = sum(e is not None and e.verdict in ("better", "worse") for e in estimates)
    p_value = binomtest(different, len(chunks), 0.05, alternative="greater").pvalue
    print(f"A/A: {different} of {len(chunks)} comparisons called different")
    assert len(chunks) >= AA_COMPARISONS
    assert p_value > 0.005, f"{different} of {len(chunks)} A/A comparisons called different"


STRICT = 0.999
"""The known-size tests check coverage with a 99.9% CI of the same statistic on the same pairs: a calibrated one
misses the known size in 1 run of 1000, where the tool's own 95% CI (printed, for the notes) misses in 1 of 20."""


CONTENTION = 0.15
"""How much more than its nominal length a busy-wait may cost a step on this 2-core host: while one process
busy-waits, EngineCore spins on the shared-memory queue and the front-end streams outputs, three busy processes on
two cores. Measured here at one-step blocks: the 10% delay cost 6-7% more than nominal on both sides (1.0970 vs
1.0910, 1.0863 vs 1.0814, 1.0853 vs 1.0804)."""


OVERLAP = 0.10
"""How much less than its nominal length a busy-wait in EngineCore may cost a step here: seen once, on a fresh
clone's CI on 2026-11-27, 8.16% [99.9% CI 7.72%, 8.61%] for a nominal 8.64% at ~11 ms steps (the front-end's work
may run on the core the idle worker leaves while EngineCore waits, work that slows the reference arm's steps;
not yet verified). A halved delay still fails."""


def assert_covers(pairs: list[tuple[float, float, float, float]], known: float, higher_is_better: bool) -> None:
    """The strict ratio-of-sums CI of (trial steps, seconds, reference steps, seconds) pairs reaches the known
    effect: between :data:`OVERLAP` less and :data:`CONTENTION` more of it. A lost, halved or doubled delay still
    fails."""
    columns = [[p[i] for p in pairs] for i in range(4)]
    strict = paired_ratio_of_sums(*columns, higher_is_better=higher_is_better, confidence=STRICT)
    print(f"  {STRICT:.1%} CI [{strict.ci_low:.4f}, {strict.ci_high:.4f}] over {strict.n} pairs")
    assert strict.n >= least_pairs(0.001), strict  # fewer pairs cannot reach p < 0.001: the CI would be unbounded
    highest, lowest = 1 + (1 + CONTENTION) * (known - 1), 1 + (1 - OVERLAP) * (known - 1)
    assert strict.ci_low <= highest and lowest <= strict.ci_high, (known, lowest, highest, strict)


@pytest.mark.engine
@pytest.mark.parametrize("side", ["worker", "engine_core"])
def test_a_known_host_delay_is_measured_with_its_size_on_each_side(
    bench: Workbench, aa: InterleaveResult, side: str
) -> None:
    """B busy-waits 10% of a mean step longer than A, in the worker process (mp executor) or in EngineCore before
    it processes the batch's output, at one-step blocks: B's steps are A's plus that, so the CI of the step-time
    ratio covers 1 + extra / A's mean step. The worker's wait proves each batch carried its arm to the other
    process (a batch of the wrong arm halves the effect at one-step blocks); a lost, halved or doubled delay fails
    it."""
    step_s = aa.mean_step_s["A"] or 0.02
    extra_s = 0.10 * step_s
    arms = {"known_delay": {f"{side}_ms": 1.0}}, {"known_delay": {f"{side}_ms": 1.0 + extra_s * 1e3}}
    result = interleaved_comparison(bench, *arms, block_steps=1, budget_s=20, seed=2)
    estimate = result.estimate
    assert estimate is not None, result.to_dict()
    known_ratio = 1 + extra_s * sum(a[0] for a, _ in result.sums) / sum(a[1] for a, _ in result.sums)
    print(
        f"{side} delay: {estimate.ratio:.4f} [{estimate.ci_low:.4f}, {estimate.ci_high:.4f}], known {known_ratio:.4f}"
    )
    assert estimate.verdict == "worse", result.to_dict()
    assert_covers([(b[0], b[1], a[0], a[1]) for a, b in result.sums], known_ratio, higher_is_better=False)


@pytest.mark.engine
def test_a_trial_with_faster_typical_steps_that_adds_rare_long_pauses_is_called_worse(
    bench: Workbench, aa: InterleaveResult
) -> None:
    """The reference busy-waits 10% of a step in EngineCore before every batch's output; the trial does not, but
    stalls 20 steps on every 25th of its decode batches (``known_stall``). Its typical steps are faster (the body,
    each stalled step counted up to twice the running median, about 0.95 of the reference's), its whole time far
    longer (about 1.7): the guard shows the whole time worse by more than its margin, so the comparison is called
    worse, never better, and the sweep never nominates it."""
    step_s = aa.mean_step_s["A"] or 0.02
    reference = {"known_delay": {"engine_core_ms": 0.10 * step_s * 1e3}}
    trial = {"known_delay": {}, "known_stall": {"stall_ms": 20 * step_s * 1e3, "every": 25}}
    result = interleaved_comparison(bench, reference, trial, block_steps=1, budget_s=20, seed=3)
    assert result.estimate is not None and result.guard is not None, result.to_dict()
    whole = result.guard.whole
    print(f"body {result.estimate.ratio:.4f} [{result.estimate.ci_low:.4f}, {result.estimate.ci_high:.4f}]; "
          f"whole {whole.ratio:.4f} [{whole.ci_low:.4f}, {whole.ci_high:.4f}]")  # fmt: skip
    assert result.estimate.ratio < 1 and result.guard.breached, result.to_dict()
    throughput = step_estimate(result, "output_tokens_per_s")
    assert result.verdict == "worse" and throughput is not None and throughput.verdict == "worse"
