"""Statistics for comparing benchmark runs on a noisy host.

Everything here is a pure function on numbers: no I/O, no vLLM. The central
quantity is the ratio treatment/baseline (1.0 = no change), estimated with a
bootstrap confidence interval so that a tuning decision is only called when the
interval clears 1 -- host noise otherwise produces "wins" that do not replicate.

For throughput-like quantities the ratio of sums (:func:`paired_ratio_of_sums`)
is the estimand, with a sign-flip test of the same statistic and the CI that
inverts that test (it holds its coverage at a handful of pairs, where the
bootstrap's does not). Across several
candidates and looks: Holm's step-down, O'Brien-Fleming group-sequential
boundaries, and the power functions (MDE, pairs needed) that size a comparison
from the per-pair log-ratio SD; :func:`mirrored_order` balances carry-over.

One module per job, as Optuna lays out ``samplers/``: ``estimate`` (the estimate and its verdict), ``bootstrap``,
``ratio_of_sums`` (the sign-flip test and its inverted CI), ``body`` (the steps' body and their tail guard),
``sequential`` and ``power``; this package's names are the public ones.
"""

from tuner.stats.attainment import (
    LEAST_ROUNDS,
    AttainmentDifference,
    AttainmentDifferenceRecord,
    PairedCounts,
    attainment_difference,
    paired_attainment,
)
from tuner.stats.body import (
    GUARD_MARGIN,
    BodyComparison,
    BodyRecord,
    GuardRecord,
    WholeGuard,
    body_comparison,
    running_caps,
    split_at_caps,
)
from tuner.stats.bootstrap import paired_ratio, unpaired_ratio
from tuner.stats.capacity import (
    Capacity,
    CapacityEstimate,
    LevelResult,
    Share,
    Target,
    capacity_ratio,
    resolvable,
    rounds_needed,
    tier,
    tier_crossings,
)
from tuner.stats.capacity_records import ArmCapacityRecord, CapacityEstimateRecord
from tuner.stats.collector import (
    Collection,
    CollectorBlock,
    CollectorEstimate,
    CollectorRecord,
    ProcessBlock,
    block_pairs,
    collector_estimate,
    schedule,
)
from tuner.stats.crossing import Crossing, crossing
from tuner.stats.estimate import (
    RatioEstimate,
    RatioRecord,
    Statistic,
    Verdict,
    call_verdict,
    false_positive_rate,
    finite_or_none,
    not_estimated,
    percentiles,
    reached_precision,
    within_margin,
)
from tuner.stats.power import Guard, detection_power, mde, mirrored_order, pairs_needed
from tuner.stats.product import PRODUCT, in_orientation, product_estimate, unmeasured
from tuner.stats.proportion import arm_attainment
from tuner.stats.ratio_of_sums import (
    MIN_SIGN_FLIP_PAIRS,
    UNBOUNDED_LOG,
    least_pairs,
    paired_ratio_of_sums,
    ratio_of_sums_estimates,
)
from tuner.stats.sd_prediction import SdPrediction, drift_factors, excess_kurtosis, predict_sd
from tuner.stats.sequential import boundary_crossing, holm, obf_boundaries, obf_constant, sequential_p_value
from tuner.stats.stall_rate import RateDifference, RateDifferenceRecord, StallRule, paired_rate_difference, stall_flags

__all__ = [
    "GUARD_MARGIN",
    "LEAST_ROUNDS",
    "MIN_SIGN_FLIP_PAIRS",
    "PRODUCT",
    "UNBOUNDED_LOG",
    "ArmCapacityRecord",
    "AttainmentDifference",
    "AttainmentDifferenceRecord",
    "BodyComparison",
    "BodyRecord",
    "Capacity",
    "CapacityEstimate",
    "CapacityEstimateRecord",
    "Collection",
    "CollectorBlock",
    "CollectorEstimate",
    "CollectorRecord",
    "Crossing",
    "Guard",
    "GuardRecord",
    "LevelResult",
    "PairedCounts",
    "ProcessBlock",
    "RateDifference",
    "RateDifferenceRecord",
    "RatioEstimate",
    "RatioRecord",
    "SdPrediction",
    "Share",
    "StallRule",
    "Statistic",
    "Target",
    "Verdict",
    "WholeGuard",
    "arm_attainment",
    "attainment_difference",
    "block_pairs",
    "body_comparison",
    "boundary_crossing",
    "call_verdict",
    "capacity_ratio",
    "collector_estimate",
    "crossing",
    "detection_power",
    "drift_factors",
    "excess_kurtosis",
    "false_positive_rate",
    "finite_or_none",
    "holm",
    "in_orientation",
    "least_pairs",
    "mde",
    "mirrored_order",
    "not_estimated",
    "obf_boundaries",
    "obf_constant",
    "paired_attainment",
    "paired_rate_difference",
    "paired_ratio",
    "paired_ratio_of_sums",
    "pairs_needed",
    "percentiles",
    "predict_sd",
    "product_estimate",
    "ratio_of_sums_estimates",
    "reached_precision",
    "resolvable",
    "rounds_needed",
    "running_caps",
    "schedule",
    "sequential_p_value",
    "split_at_caps",
    "stall_flags",
    "tier",
    "tier_crossings",
    "unmeasured",
    "unpaired_ratio",
    "within_margin",
]
