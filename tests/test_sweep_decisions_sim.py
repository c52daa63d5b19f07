"""The statistics and the sweep's decisions on a simulated host (tests/simulation.py): error rates that can fail.

Every rate is asserted with enough replicates to catch the failure it guards against; each test states its
error rates. Seeds are fixed, so a run is reproducible. The sweeps size confirmation for a 2% gain
(``Design(min_effect=0.02)``, ~600 pairs per candidate) to stay in seconds: the error control does not depend on
the size, and ``benchmarks/sweep_decisions.py`` runs the default 1% design.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats
from simulation import STEP_HOST, Host, Order, SweepSpec, run_sweeps, simulate_pairs, true_ratio

from tuner.stats import RatioEstimate, boundary_crossing, obf_constant, paired_ratio, pairs_needed
from tuner.sweep.decisions import (
    ConfirmationPlan,
    Design,
    ScreeningResult,
    confirm,
    gain_bounds,
    non_inferiority,
    plan_confirmation,
    pooled_log_sd,
    power_statement,
    select_candidates,
    slo,
    spend_budget,
)

SWEEP_DESIGN = Design(min_effect=0.02)


def _estimate(low: float, ratio: float, high: float, *, n: int = 200, higher_is_better: bool = True) -> RatioEstimate:
    return RatioEstimate(ratio, low, high, 0.5, n, 0.15, "ratio_of_sums", higher_is_better, "no_difference")


def aa_limit(comparisons: int, nominal: float) -> int:
    """The most false positives an A/A batch may show: exceeded with at most 1% chance at the nominal rate."""
    return int(stats.binom.ppf(0.99, comparisons, nominal))


def guard_power(comparisons: int, nominal: float, true_rate: float) -> float:
    """The chance that :func:`aa_limit` catches a procedure whose real false-positive rate is ``true_rate``."""
    return float(stats.binom.sf(aa_limit(comparisons, nominal), comparisons, true_rate))


def test_host_noise_is_the_step_level_default() -> None:
    """The fake host's per-pair SD is the CPU host's step-level 0.15 that the defaults are sized for."""
    estimates = simulate_pairs(STEP_HOST, 2000, reps=20, seed=1).estimates(n_resamples=50, n_permutations=9)
    assert np.mean([e.log_sd for e in estimates]) == pytest.approx(0.15, abs=0.01)


@pytest.mark.parametrize("n_pairs", [8, 178])  # exact enumeration; Monte-Carlo at the screening budget
def test_aa_guard_would_catch_a_doubled_false_positive_rate(n_pairs: int) -> None:
    """A/A with drift, heavy tails, pauses and 1% carry-over in mirrored order: the ratio-of-sums verdict stays at
    5%. 400 comparisons fail at > aa_limit (1% chance at 5%) and catch a true 10% rate >= 90% of the time."""
    comparisons = 400
    assert guard_power(comparisons, 0.05, 0.10) >= 0.9
    data = simulate_pairs(Host(carry=0.01), n_pairs, reps=comparisons, seed=2)
    verdicts = [e.verdict for e in data.estimates(n_resamples=400, n_permutations=999, seed=3)]
    false_positives = sum(v in ("better", "worse") for v in verdicts)
    assert false_positives <= aa_limit(comparisons, 0.05), false_positives


def test_mirrored_order_cancels_carry_over_random_order_does_not() -> None:
    """A trial arm leaving 2% residue on the next block, A/A, 400 pairs: mirrored order stays at 5% (300
    comparisons, 1% chance to exceed the limit); random AB/BA biases the ratio by half the residue and is called
    different far above 5% (at the 1% level)."""
    comparisons = 300
    host = Host(carry=0.02)
    rates = {}
    orders: tuple[Order, ...] = ("mirrored", "random")
    for order in orders:
        data = simulate_pairs(host, 400, reps=comparisons, seed=4, order=order)
        verdicts = [e.verdict for e in data.estimates(n_resamples=400, n_permutations=999, seed=5)]
        rates[order] = sum(v in ("better", "worse") for v in verdicts)
    assert rates["mirrored"] <= aa_limit(comparisons, 0.05), rates
    assert stats.binom.sf(rates["random"] - 1, comparisons, 0.05) < 0.01, rates


def test_ratio_of_sums_finds_a_tail_effect_that_median_and_wilcoxon_miss() -> None:
    """The trial halves rare long pauses (2% of blocks, 2 blocks long): truly 1.96% faster, with no change in a
    typical block. Over 100 comparisons of 3000 pairs the ratio of sums calls it better most of the time; the
    median + Wilcoxon verdict, which asks which arm wins more pairs, almost never does."""
    host = Host(pause_p=0.02, pause_len=2.0)
    assert true_ratio(host, pause_scale=0.5) == pytest.approx(1.0196, abs=1e-4)
    data = simulate_pairs(host, 3000, reps=100, seed=6, pause_scale=0.5)
    ratio_of_sums = [e.verdict for e in data.estimates(n_resamples=200, n_permutations=199, seed=7)]

    trial_step = data.trial_time / data.trial_amount
    reference_step = data.reference_time / data.reference_amount
    # The median verdict needs the Wilcoxon test at 5% first; only those comparisons need its slow bootstrap.
    wilcoxon = stats.wilcoxon(np.log(trial_step) - np.log(reference_step), axis=1).pvalue
    median = [
        paired_ratio(trial_step[i], reference_step[i], higher_is_better=False, n_resamples=199).verdict
        for i in np.flatnonzero(wilcoxon < 0.05)
    ]
    assert sum(v == "better" for v in ratio_of_sums) >= 70
    assert sum(v == "better" for v in median) <= 15


def _one_candidate_plan() -> ConfirmationPlan:
    """A confirmation of one candidate sized for +3% at per-pair SD 0.15, 4 looks (~210 pairs)."""
    pilot = RatioEstimate(1.0, 0.99, 1.01, 1.0, 1000, 0.15, "ratio_of_sums", True, "no_difference")
    plan = plan_confirmation([ScreeningResult(0, True, pilot)], Design(m=1, min_effect=0.03))
    assert plan.candidates == (0,) and plan.pairs == pairs_needed(0.15, 0.03, looks=4)
    return plan


def _sequential_runs(plan: ConfirmationPlan, gain: float, reps: int, seed: int) -> tuple[int, list[int]]:
    """The candidate confirmed look by look until the decision stops: rejections, and the look each stopped at.
    (The decision reads the standardized estimate, so tiny bootstrap and permutation counts suffice.)"""
    data = simulate_pairs(STEP_HOST, plan.pairs, reps=reps, seed=seed, gain=gain)
    at_looks = [data.estimates(n, n_resamples=20, n_permutations=9, seed=seed) for n in plan.looks]
    rejected, stopped = 0, []
    for rep in range(reps):
        for look in range(len(plan.looks)):
            decision = confirm(plan, [], {0: [at_looks[k][rep] for k in range(look + 1)]})
            if decision.stop:
                break
        rejected += decision.winner == 0
        stopped.append(decision.look)
    return rejected, stopped


def test_group_sequential_rule_keeps_the_nominal_rate_under_aa() -> None:
    """O'Brien-Fleming over 4 looks at one-sided 2.5%, A/A on the heavy-tailed drifting host: 800 confirmations
    reject within the 1%..99% binomial band around 2.5% (a true 5% is caught with >= 85% chance), and almost
    all run to the last look."""
    reps = 800
    rejected, stopped = _sequential_runs(_one_candidate_plan(), 0.0, reps, seed=8)
    assert guard_power(reps, 0.025, 0.05) >= 0.85
    assert stats.binom.ppf(0.01, reps, 0.025) <= rejected <= aa_limit(reps, 0.025), rejected
    assert np.mean(np.array(stopped) == 4) >= 0.98


def test_group_sequential_rule_stops_early_on_a_clear_effect() -> None:
    """A true +6% (twice the 3% it is sized for): 200 confirmations all succeed, and they stop by the second of 4
    looks as often as the boundary-crossing calculation says (within 10 points, 3 SE)."""
    reps = 200
    plan = _one_candidate_plan()
    rejected, stopped = _sequential_runs(plan, 0.06, reps, seed=9)
    drift = math.log(1.06) * math.sqrt(plan.pairs) / 0.15
    by_second = boundary_crossing(obf_constant(0.025, plan.fractions), plan.fractions[:2], drift)
    assert rejected >= 0.97 * reps
    assert np.mean(np.array(stopped) <= 2) == pytest.approx(by_second, abs=0.10)
    assert np.mean(stopped) < 3


def test_sweep_false_winner_rate_under_aa_with_20_trials() -> None:
    """20 trials that change nothing, screening then confirmation of 3 candidates with Holm: a winner in at most
    5% of 200 sweeps (expected ~2.5%: exceeded with ~1.4% chance; a true 10% passes with 0.6% chance)."""
    outcomes = run_sweeps(SweepSpec(design=SWEEP_DESIGN), reps=200, seed=10)
    assert sum(o.winner is not None for o in outcomes) <= 10


def test_sweep_confirms_a_real_gain_at_the_promised_rate() -> None:
    """One trial truly +2% among 20: it is deployed as often as the plan's own power calculation (selection among
    20 by screening lower bound, times confirmation power) promises, within 5 points over 500 sweeps (SE ~2.2
    points: a correct promise fails ~3% of the time, one 10 points off passes < 1%), and a null trial is rarely
    deployed instead."""
    spec = SweepSpec(gains=(0.02,) + (0.0,) * 19, design=SWEEP_DESIGN)
    outcomes = run_sweeps(spec, reps=500, seed=11)
    found = np.mean([o.winner == 0 for o in outcomes])
    promised = np.nanmean([o.promised for o in outcomes])
    assert found == pytest.approx(promised, abs=0.05), (found, promised)
    assert 0.3 < promised < 0.9  # both selection and confirmation matter at this budget
    assert np.mean([o.winner not in (None, 0) for o in outcomes]) <= 0.025


# ------------------------------------------------------------------------------------- decision rules


def test_candidates_rank_by_lower_bound_and_skip_the_wrong_side() -> None:
    screening = [
        ScreeningResult(1, True, _estimate(0.96, 1.10, 1.25)),  # best point estimate, but imprecise
        ScreeningResult(2, True, _estimate(1.00, 1.03, 1.06)),
        ScreeningResult(3, False, _estimate(1.05, 1.08, 1.11)),  # infeasible
        ScreeningResult(4, True, _estimate(0.90, 0.93, 0.96)),  # CI wholly worse
        ScreeningResult(5, True, _estimate(1.01 / 0.99, 1 / 0.97, 1 / 0.95, higher_is_better=False)),
        ScreeningResult(6, True, None),  # failed
    ]
    assert [r.trial for r in select_candidates(screening, m=3)] == [2, 1]
    assert [r.trial for r in select_candidates(screening, m=1)] == [2]
    assert gain_bounds(_estimate(0.9, 1.0, 1.2, higher_is_better=False)) == pytest.approx((1 / 1.2, 1.0, 1 / 0.9))


def test_plan_pools_the_screening_noise_and_sizes_for_min_effect() -> None:
    screening = [ScreeningResult(i, True, _estimate(0.99, 1.0 + i / 100, 1.05, n=101)) for i in range(5)]
    assert pooled_log_sd(screening) == pytest.approx(0.15)
    plan = plan_confirmation(screening, Design(m=3, min_effect=0.01, looks=4))
    assert plan.candidates == (4, 3, 2)
    assert plan.pairs == pairs_needed(0.15, 0.01, m=3, looks=4)
    assert plan.looks[-1] == plan.pairs and len(plan.looks) == 4 and plan.fractions[-1] == 1.0
    assert plan.mde == pytest.approx(0.01, abs=1e-4)
    capped = plan_confirmation(screening, Design(max_pairs=500))
    assert capped.pairs == 500 and capped.mde > 0.01
    nothing = plan_confirmation([ScreeningResult(0, False, _estimate(1.0, 1.1, 1.2))])
    assert nothing.candidates == () and nothing.pairs == 0
    # The budget is spent when min_effect needs fewer pairs (a drifting host's short screening understates noise).
    needed = plan_confirmation(screening, Design(m=3, min_effect=0.01, looks=2, max_pairs=plan.pairs * 3))
    spent = spend_budget(needed)
    assert needed.pairs == pairs_needed(0.15, 0.01, m=3, looks=2) and spent.pairs == plan.pairs * 3
    assert spent.looks == (math.ceil(spent.pairs / 2), spent.pairs) and spent.mde < needed.mde
    assert spend_budget(capped) == capped and spend_budget(nothing) == nothing  # never shrunk, nothing to grow
    decision = confirm(nothing, [], {})
    assert decision.winner is None and decision.stop and "no feasible candidate" in decision.reason


def test_a_trial_not_nominated_does_not_size_the_others_confirmation() -> None:
    """The plan's noise is the candidates' own: a wild configuration ranked out (a spin window of 0 scattered its
    pairs with log SD 1.05) would otherwise promise a confirmation far blunter than the one it gets."""
    calm = [ScreeningResult(i, True, _estimate(0.99, 1.0 + i / 100, 1.05, n=101)) for i in range(3)]
    wild = ScreeningResult(9, True, replace(_estimate(0.15, 0.4, 0.97, n=10), log_sd=1.05))
    plan = plan_confirmation([*calm, wild], Design(m=3, min_effect=0.01, looks=2))
    assert 9 not in plan.candidates and len(plan.candidates) == 3
    assert plan.log_sd == pytest.approx(0.15) and pooled_log_sd([*calm, wild]) > 0.2
    assert plan.pairs == pairs_needed(0.15, 0.01, m=3, looks=2)


def test_confirm_applies_holm_checks_and_reports_confirmation_side_by_side() -> None:
    screening = [ScreeningResult(t, True, _estimate(1.0, 1.05, 1.1)) for t in (7, 8)]
    plan = ConfirmationPlan((7, 8), 0.15, 1000, (1000,), Design(m=2, looks=1))
    strong = _estimate(1.02, 1.03, 1.04, n=1000)  # z = log(1.03) * sqrt(1000) / 0.15 = 6.2
    weak = _estimate(0.99, 1.006, 1.02, n=1000)  # z = 1.26: not confirmed
    decision = confirm(plan, screening, {7: [weak], 8: [strong]})
    assert decision.winner == 8 and decision.stop and decision.effect == strong
    assert [r.status for r in decision.rows] == ["not confirmed", "winner"]
    assert decision.rows[1].screening == screening[1].estimate  # screening and confirmation side by side
    assert decision.rows[1].p_holm == pytest.approx(2 * decision.rows[1].p_sequential)
    failing = non_inferiority("itl_p99_ms", _estimate(1.01, 1.04, 1.07, higher_is_better=False), margin=0.05)
    assert (failing.side, failing.passed) == ("upper", False)
    vetoed = confirm(plan, screening, {7: [weak], 8: [strong]}, {8: [failing]})
    assert vetoed.winner is None and vetoed.rows[1].status == "confirmed, fails itl_p99_ms"
    assert "no confirmed winner" in vetoed.reason
    assert vetoed.to_dict()["rows"][1]["checks"] == [failing.describe()]
    with pytest.raises(ValueError, match="planned pairs"):
        confirm(plan, screening, {7: [weak], 8: [_estimate(1.02, 1.03, 1.04, n=990)]})


def test_checks_say_which_bound_decided() -> None:
    throughput = _estimate(0.97, 0.99, 1.01)
    assert non_inferiority("output_tokens_per_s", throughput, margin=0.05).passed
    assert non_inferiority("output_tokens_per_s", throughput, margin=0.02).side == "lower"
    latency = _estimate(0.9, 1.0, 1.1, higher_is_better=False)
    within = slo("ttft_p99_ms", latency, anchor=100.0, max=115.0)
    assert (within.side, within.bound, within.passed) == ("upper", pytest.approx(110.0), True)
    assert not slo("ttft_p99_ms", latency, anchor=100.0, max=105.0).passed  # the point (100) passes, the CI not
    floor = slo("output_tokens_per_s", throughput, anchor=1000.0, min=960.0)
    assert (floor.side, floor.passed) == ("lower", True)
    with pytest.raises(ValueError):
        slo("x", latency, anchor=1.0)


def test_power_statement_for_the_default_step_budget() -> None:
    statement = power_statement(0.15, trials=20, screening_pairs=178, pairs_per_minute=89.0)
    assert statement.pairs_needed == pairs_needed(0.15, 0.01, m=3, looks=4)
    assert statement.screening_mde == pytest.approx(0.032, abs=0.001)  # screening alone cannot see 1-3%
    assert statement.confirmation_mde == pytest.approx(0.01, abs=2e-4)
    assert 0.0 < statement.sweep_power < 0.8  # selection among 20 costs power
    text = "\n".join(statement.lines())
    assert "min)" in text and "screening never names the winner" in text
    short = power_statement(0.15, trials=3, screening_pairs=8, confirmation_pairs=8, pairs_per_minute=89.0)
    assert "8 pairs per candidate (~5 s)" in "\n".join(short.lines())  # under a minute: seconds, not "~0 min"
    budget = power_statement(0.15, trials=20, screening_pairs=178, confirmation_pairs=300)
    assert budget.confirmation_mde > 0.02 and budget.sweep_power < statement.sweep_power
