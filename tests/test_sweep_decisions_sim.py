"""The statistics and the sweep's decisions on a simulated host (tests/simulation.py): error rates that can fail.

Every rate is asserted with enough replicates to catch the failure it guards against; each test states its
error rates. Seeds are fixed, so a run is reproducible. To stay in seconds the sweeps here confirm with 1,000 sign
flips per look (the tool uses 10,000: fewer flips only cap the statistic lower, so an early look stops less often)
and budgets of a few hundred pairs; ``benchmarks/simulations/sweep_decisions.py`` runs the default design with the
tool's flips.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats
from simulation import (
    FINE_GRAIN,
    HEAVY_GRAIN,
    RUN_GRAIN,
    SLOW_GRAIN,
    STEP_HOST,
    Host,
    Order,
    SweepSpec,
    confirmation_plan,
    run_sweeps,
    simulate_pairs,
    true_ratio,
)

from tuner.metrics.pairs import pairs_estimate
from tuner.stats import RatioEstimate, boundary_crossing, obf_boundaries, obf_constant, paired_ratio, pairs_needed
from tuner.sweep.decisions import bounded_gain, confirm, repeated_interval, sign_flip_z
from tuner.sweep.plans import (
    CONFIRMATION_PACE,
    LEAST_POWER,
    Candidate,
    ConfirmationPlan,
    Design,
    confirmable_pairs,
    nominate,
    plan_candidate,
    plan_confirmation,
)
from tuner.sweep.power_statements import Ranking, confirmation_lines, selection_chance
from tuner.sweep.screening import ScreeningResult, gain_bounds, ruled_out, select_candidates
from tuner.sweep.slo_checks import non_inferiority, slo

FLIPS = 1000  # sign flips per confirmation look in these tests (see the module docstring)
MIXED = (FINE_GRAIN,) * 4 + (SLOW_GRAIN,) * 3 + (RUN_GRAIN,) * 3
"""Ten trials measured three ways: short step blocks, slow step blocks and run-level pairs."""


def _estimate(low: float, ratio: float, high: float, *, n: int = 200, higher_is_better: bool = True) -> RatioEstimate:
    return RatioEstimate(ratio, low, high, 0.5, n, 0.15, "ratio_of_sums", higher_is_better, "not_significant")


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
    """One candidate's confirmation holding what +3% needs at per-pair SD 0.15 over 4 looks (~210 pairs)."""
    needed = pairs_needed(0.15, 0.03, looks=4)
    plan = confirmation_plan(0.15, 1.0, (needed + 0.5) / CONFIRMATION_PACE, Design(m=1, min_effect=0.03))
    assert plan.candidates == (0,) and plan.plans[0].pairs == needed and len(plan.plans[0].looks) == 4
    return plan


def _sequential_runs(plan: ConfirmationPlan, gain: float, reps: int, seed: int) -> tuple[int, list[int]]:
    """The candidate confirmed look by look until the decision stops: rejections, and the look each stopped at."""
    looks = plan.plans[0].looks
    data = simulate_pairs(STEP_HOST, looks[-1], reps=reps, seed=seed, gain=gain)
    at_looks = [data.estimates(n, n_permutations=FLIPS, seed=seed) for n in looks]
    rejected, stopped = 0, []
    for rep in range(reps):
        for look in range(len(looks)):
            decision = confirm(plan, [], {0: [at_looks[k][rep] for k in range(look + 1)]})
            if decision.stop:
                break
        rejected += decision.winner == 0
        stopped.append(decision.look)
    return rejected, stopped


def test_group_sequential_rule_keeps_the_nominal_rate_under_aa() -> None:
    """O'Brien-Fleming over 4 looks at one-sided 2.5% on the sign-flip test of each look, A/A on the heavy-tailed
    drifting host: 800 confirmations reject at most at the 99% binomial limit around 2.5% (a true 5% is caught
    with >= 85% chance), and almost all run to the last look."""
    reps = 800
    rejected, stopped = _sequential_runs(_one_candidate_plan(), 0.0, reps, seed=8)
    assert guard_power(reps, 0.025, 0.05) >= 0.85
    assert rejected <= aa_limit(reps, 0.025), rejected
    assert np.mean(np.array(stopped) == 4) >= 0.98


def test_group_sequential_rule_stops_early_on_a_clear_effect() -> None:
    """A true +6% (twice the 3% it is sized for): 200 confirmations all succeed, and they stop by the second of 4
    looks as often as the boundary-crossing calculation says (within 10 points, 3 SE: the first look's boundary,
    4.05, is beyond what 1,000 flips can show, and such paths cross at the second)."""
    reps = 200
    plan = _one_candidate_plan()
    rejected, stopped = _sequential_runs(plan, 0.06, reps, seed=9)
    fractions = plan.plans[0].fractions
    drift = math.log(1.06) * math.sqrt(plan.plans[0].pairs) / 0.15
    by_second = boundary_crossing(obf_constant(0.025, fractions), fractions[:2], drift)
    assert rejected >= 0.97 * reps
    assert np.mean(np.array(stopped) <= 2) == pytest.approx(by_second, abs=0.10)
    assert np.mean(stopped) < 3


def test_sweep_false_winner_rate_under_aa_with_mixed_grains() -> None:
    """Ten trials that change nothing, measured three ways, each candidate confirmed on its own plan with Holm:
    a winner in at most 5% of 200 sweeps (the level is 2.5%: exceeded with ~1.4% chance; a true 10% passes with
    0.6% chance)."""
    spec = SweepSpec(gains=(0.0,) * len(MIXED), grains=MIXED, budget_s=30, confirmation_flips=FLIPS)
    outcomes = run_sweeps(spec, reps=200, seed=10)
    assert sum(o.winner is not None for o in outcomes) <= 10


def assert_promise_kept(spec: SweepSpec, seed: int) -> None:
    """Over 400 sweeps of ``spec`` (its first trial the only real gain), that trial is deployed within 6 points of
    the tool's own promise, the promise is mid-range, and a null trial is deployed at most at the level."""
    outcomes = run_sweeps(spec, reps=400, seed=seed)
    found = np.mean([o.winner == 0 for o in outcomes])
    promised = np.nanmean([o.promised for o in outcomes])
    assert found == pytest.approx(promised, abs=0.06), (found, promised)
    assert 0.3 < promised < 0.95
    assert np.mean([o.winner not in (None, 0) for o in outcomes]) <= 0.025


def test_sweep_confirms_a_real_gain_at_the_promised_rate_beside_other_grains() -> None:
    """One short-step-block trial truly +0.7% among ten measured three ways, 30 s per candidate: it is deployed as
    often as the tool's own power calculation (selection by screening lower bound across the grains, times the
    confirmation power of its own plan) promises, within 6 points over 400 sweeps (SE ~2.4 points: a correct
    promise fails ~1% of the time, one 10 points off passes ~5%), and a null trial is rarely deployed instead."""
    gains = (0.007,) + (0.0,) * (len(MIXED) - 1)
    spec = SweepSpec(gains=gains, grains=MIXED, budget_s=30, confirmation_flips=FLIPS)
    assert_promise_kept(spec, seed=11)


def test_the_promise_holds_when_the_hosts_noise_drifts_from_its_calibration() -> None:
    """The same, with the step trials in heavy-tailed 1-step pairs (excess kurtosis ~23), the promise made from a
    calibration of 300 pairs, and the host's noise then standing exp(0.35 z) times where it was calibrated (this
    CPU's drift, :data:`tuner.stats.sd_prediction.DRIFT`): the promise, averaged over where the noise may stand,
    is within 6 points of what 400 sweeps deploy (SE ~2.5 points), and no null trial is deployed more often than
    the level allows. A promise at the calibration's SD alone fails it: 70% against 59% deployed here."""
    grains = (HEAVY_GRAIN,) * 4 + (SLOW_GRAIN,) * 3 + (RUN_GRAIN,) * 3
    spec = SweepSpec(
        gains=(0.007,) + (0.0,) * (len(grains) - 1), grains=grains, budget_s=30, confirmation_flips=FLIPS,
        host_drift=0.35, calibration_pairs=300,
    )  # fmt: skip
    assert_promise_kept(spec, seed=12)


# ------------------------------------------------------------------------------------- plans


def _nominate(*rows: tuple[int, float, float, int]) -> list[tuple[Candidate, float, int]]:
    """(trial, per-pair SD, pairs per second, screening pairs) -> nominated candidates."""
    return [(Candidate(t, {}, "steps", rate, f"grain {t}"), sd, n) for t, sd, rate, n in rows]


def test_each_candidate_spends_its_own_budget_at_its_own_pace() -> None:
    """A 2-step-block candidate beside two slow-block ones (the quickstart's case when GC pacing used long blocks):
    one plan for all gave it 8 pairs, 0.64 s of its 30 s; its own plan holds what 30 s buy at its rate and detects
    under 1.5%."""
    plan = plan_confirmation(
        _nominate((1, 0.038, 10.0, 200), (2, 0.1, 0.2, 10), (3, 0.1, 0.2, 10)), budget_s=30, design=Design(looks=2)
    )
    fast, slow, _ = plan.plans
    assert fast.pairs == int(CONFIRMATION_PACE * 30 * 10.0) and slow.pairs == int(CONFIRMATION_PACE * 30 * 0.2)
    assert fast.budget_s == slow.budget_s == 30  # the same budget each, not the same pairs
    assert fast.looks == (120, 240) and fast.fractions == (0.5, 1.0)
    assert not slow.measurable and plan.candidates == (1,) and fast.m == 1  # Holm over those that can be confirmed
    assert fast.mde < 0.015 and fast.mde_upper > fast.mde
    assert fast.needed is not None and fast.needed < fast.pairs
    assert "not measured" in "\n".join(confirmation_lines(plan))


def test_measurability_is_the_exact_tests_smallest_p() -> None:
    """The exact one-sided sign-flip test's smallest p is 2^-n: a plan is measured only when that can reach the
    last look's level (one look at 2.5%: 6 pairs; Holm's first step over 3 with 4 looks: 8)."""
    assert confirmable_pairs(0.025, 1) == 6 and confirmable_pairs(0.025 / 3, 4) == 8
    plan = plan_confirmation(_nominate((1, 0.1, 1.0, 50)), budget_s=6 / CONFIRMATION_PACE, design=Design(looks=1))
    assert plan.plans[0].pairs == 6 and plan.candidates == (1,)
    fewer = plan_confirmation(_nominate((1, 0.1, 1.0, 50)), budget_s=5 / CONFIRMATION_PACE, design=Design(looks=1))
    assert fewer.candidates == () and "none of 1 candidate(s) can be confirmed" in confirm(fewer, [], {}).reason


def test_few_consistent_pairs_cannot_confirm_and_a_winner_is_always_bounded() -> None:
    """Five consistent single-step pairs (+3.5%, SD 0.015, the quickstart's false winner): the t statistic read
    before gave p 0.003; the exact sign-flip test cannot go below 1/32, so no look of such a plan confirms, and its
    95% interval is unbounded. With more consistent pairs the same gain is confirmed, with a bounded interval on the
    gain side that agrees with the decision."""
    rng = np.random.default_rng(1)
    screening = [ScreeningResult(1, True, _estimate(1.0, 1.03, 1.06))]

    def decide(n: int) -> tuple[ConfirmationPlan, RatioEstimate, int | None]:
        plan = confirmation_plan(0.015, 1.0, n / CONFIRMATION_PACE, Design(m=1, looks=1))
        ref = np.full(n, 1.0)
        trial = ref / 1.035 * np.exp(rng.normal(0, 0.015, n))  # step seconds: the trial's are 3.5% shorter
        estimate = pairs_estimate([(1.0, t, 1.0, r) for t, r in zip(trial, ref, strict=True)], "output_tokens_per_s")
        return plan, estimate, confirm(plan, screening, {0: [estimate]}).winner

    plan, few, winner = decide(5)
    assert few.p_value >= 1 / 16 and sign_flip_z(few) <= 1.87 and winner is None and not bounded_gain(few)
    assert plan.candidates == ()  # 5 pairs cannot reach one-sided 2.5%: not even measured
    plan, enough, winner = decide(12)
    assert winner == 0 and bounded_gain(enough) and enough.ci_low > 1.0 and enough.ci_high < 1.2


def test_a_confirmed_candidate_needs_its_latest_interval_on_the_gain_side() -> None:
    """Decision and printed interval agree: a Holm-significant sequence whose latest look's interval reaches 1 is
    not confirmed."""
    plan = confirmation_plan(0.1, 1.0, 2000, Design(m=1, looks=2))
    first, last = plan.plans[0].looks
    strong = replace(_estimate(1.05, 1.1, 1.15, n=first), p_value=1e-6)
    touching = replace(_estimate(0.999, 1.02, 1.04, n=last), p_value=0.04)
    assert confirm(plan, [], {0: [strong]}).winner == 0
    decision = confirm(plan, [], {0: [strong, touching]})
    assert decision.rows[0].p_holm <= 0.025 and decision.winner is None and decision.stop


def test_sign_flip_z_reads_the_gain_side_of_the_two_sided_test() -> None:
    up = replace(_estimate(1.01, 1.03, 1.05), p_value=0.02)
    assert sign_flip_z(up) == pytest.approx(stats.norm.isf(0.01))
    down = replace(_estimate(0.95, 0.97, 0.99), p_value=0.02)
    assert sign_flip_z(down) == pytest.approx(stats.norm.isf(0.99))
    latency = replace(_estimate(0.95, 0.97, 0.99, higher_is_better=False), p_value=0.02)  # shorter: a gain
    assert sign_flip_z(latency) > 2
    assert sign_flip_z(replace(up, p_value=float("nan"))) == 0.0
    with pytest.raises(ValueError, match="ratio of sums"):
        sign_flip_z(replace(up, statistic="median"))


def test_selection_chance_across_grains() -> None:
    """A precise trial's gain is selected against noisy ones far more often than among equally precise ones; with
    no more trials than candidates selection is certain."""
    precise, noisy = Ranking.of(0.04, 200), Ranking.of(0.2, 8)
    assert selection_chance(0.01, precise, [noisy] * 9, 3) > selection_chance(0.01, precise, [precise] * 9, 3)
    assert selection_chance(0.01, noisy, [precise] * 2, 3) == pytest.approx(1.0)
    assert 0.0 < selection_chance(0.0, precise, [precise] * 9, 3) == pytest.approx(0.3, abs=0.03)  # 3 of 10 by chance


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


def test_a_trial_screening_already_answered_is_not_a_candidate() -> None:
    """Screening showed it within +-1% (the quickstart's trial 1: [0.993, 1.007]): confirming it could only spend
    its budget on what is answered. One whose interval still reaches a 1% gain stays."""
    screening = [
        ScreeningResult(1, True, _estimate(0.993, 1.0, 1.007)),
        ScreeningResult(2, True, _estimate(0.99, 1.005, 1.02)),
        ScreeningResult(3, True, _estimate(0.97, 0.985, 1.0)),  # reaches no gain at all
    ]
    assert [r.trial for r in select_candidates(screening, None, 0.01)] == [2]
    assert [r.trial for r in ruled_out(screening, 0.01)] == [1, 3]
    assert [r.trial for r in select_candidates(screening, None)] == [1, 2, 3]  # by lower bound


def test_a_candidate_without_even_odds_leaves_its_place_to_the_next() -> None:
    """Three ranked candidates, two places: the first's 30 s (SD 0.2 a pair at 0.5 pairs/s) give a 1% gain almost
    no chance, so the second and third are planned (Holm over two) and a note gives the first's power; a large
    screened gain (12%) is what its plan is judged on, and then it is kept."""
    ranked = _nominate((1, 0.2, 0.5, 20), (2, 0.04, 10.0, 200), (3, 0.05, 10.0, 200))
    design = Design(m=2, looks=2)
    plan, notes = nominate(ranked, budget_s=30, design=design, screened_gain={1: 0.004, 2: 0.01, 3: 0.012})
    assert plan.candidates == (2, 3) and all(p.m == 2 for p in plan.plans)
    assert len(notes) == 1 and notes[0].startswith("trial 1 is not confirmed") and "under 50%" in notes[0]
    first = plan_candidate(ranked[0][0], 0.2, 20, budget_s=30, m=2, design=design)
    assert first.power_at(0.01) < LEAST_POWER <= first.power_at(0.3)
    kept, _ = nominate(ranked, budget_s=30, design=design, screened_gain={1: 0.3, 2: 0.01, 3: 0.012})
    assert kept.candidates == (1, 2)


def test_the_promise_counts_only_trials_that_could_be_nominated() -> None:
    """Ten precise null trials (+-0.4%), one place: each is nominated a tenth of the time by lower bound alone, and
    almost never once an interval must reach a 1% gain (its estimate 2.5 SEs above 0); a 1.5% trial whose plan needs
    a 5% estimate is nominated less often than one whose plan does not."""
    precise = Ranking.of(0.04, 400)
    assert selection_chance(0.0, precise, [precise] * 9, 1) == pytest.approx(0.1, abs=0.01)
    assert selection_chance(0.0, precise, [precise] * 9, 1, min_effect=0.01) < 0.01
    noisy = Ranking.of(0.1, 100)
    demanding = Ranking(noisy.se, noisy.half_width, math.log1p(0.05))
    hopeful = selection_chance(0.015, noisy, [noisy] * 9, 1, min_effect=0.01)
    assert selection_chance(0.015, demanding, [noisy] * 9, 1, min_effect=0.01) < hopeful / 10


def test_confirm_applies_holm_checks_and_reports_confirmation_side_by_side() -> None:
    screening = [ScreeningResult(t, True, _estimate(1.0, 1.05, 1.1)) for t in (7, 8)]
    plan = plan_confirmation(
        _nominate((7, 0.15, 1.0, 200), (8, 0.15, 1.0, 200)), budget_s=1250, design=Design(m=2, looks=1)
    )
    assert [p.pairs for p in plan.plans] == [1000, 1000]
    strong = replace(_estimate(1.02, 1.03, 1.04, n=1000), p_value=1e-4)
    weak = replace(_estimate(0.99, 1.006, 1.02, n=1000), p_value=0.2)
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
    nothing = plan_confirmation([], budget_s=30, design=Design())
    assert "no screened trial was nominated" in confirm(nothing, [], {}).reason


def test_a_winners_interval_inverts_the_decision_at_its_holm_share() -> None:
    """Two candidates, one look: the winner (the smaller p) was rejected at alpha / 2, so its interval is its gain
    +- the one-sided 1.25% quantile times the standard error its own test implies, wider than the last look's
    fixed-sample 95% interval, and above 1 as the decision is; the record and the reason carry it."""
    plan = plan_confirmation(
        _nominate((7, 0.15, 1.0, 200), (8, 0.15, 1.0, 200)), budget_s=1250, design=Design(m=2, looks=1)
    )
    strong = replace(_estimate(1.02, 1.03, 1.04, n=1000), p_value=1e-4)
    weak = replace(_estimate(0.99, 1.006, 1.02, n=1000), p_value=0.2)
    decision = confirm(plan, [], {7: [weak], 8: [strong]})
    gain, z, c = math.log(1.03), stats.norm.isf(0.5e-4), stats.norm.isf(0.025 / 2)
    assert decision.repeated == pytest.approx((math.exp(gain - c * gain / z), math.exp(gain + c * gain / z)))
    low, high = decision.repeated
    assert 1 < low < 1.02 and high > 1.04
    assert decision.to_dict()["repeated_ci"] == pytest.approx([low, high])
    assert f"[{low - 1:+.2%}, {high - 1:+.2%}]" in decision.reason and "inverts the decision" in decision.reason


def test_the_repeated_interval_reaches_1_exactly_where_the_boundary_is_reached() -> None:
    """One candidate, four looks: a look whose statistic sits just above its O'Brien-Fleming boundary gives a lower
    end just above 1, just below it one just below 1; a look with no evidence of a gain bounds nothing, and the
    looks' intervals intersect."""
    plan = confirmation_plan(0.1, 1.0, 2000, Design(m=1, looks=4)).plans[0]
    boundaries = obf_boundaries(0.025, plan.fractions)
    boundary = boundaries[1]

    def look(n: int, z: float, ratio: float = 1.03) -> RatioEstimate:
        return replace(_estimate(ratio * 0.99, ratio, ratio * 1.01, n=n), p_value=2 * stats.norm.sf(z))

    first, second = plan.looks[:2]
    above = repeated_interval([look(first, 0.5), look(second, boundary + 0.01)], plan, 0.025)
    below = repeated_interval([look(first, 0.5), look(second, boundary - 0.01)], plan, 0.025)
    assert 1 < above[0] < 1.001 and 0.999 < below[0] < 1
    assert repeated_interval([look(first, 0.0, ratio=1.0)], plan, 0.025) == (0.0, math.inf)
    g1, g2 = math.log(1.03), math.log(1.05)
    each = [
        (math.exp(g - c * g / z), math.exp(g + c * g / z))
        for g, c, z in ((g1, boundaries[0], 4.0), (g2, boundaries[1], 3.0))
    ]
    both = repeated_interval([look(first, 4.0), look(second, 3.0, ratio=1.05)], plan, 0.025)
    assert both == pytest.approx((max(e[0] for e in each), min(e[1] for e in each)))


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
