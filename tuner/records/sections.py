"""The typed sections of a sweep's records, below :class:`tuner.records.loader.TrialRow` and
:class:`tuner.records.loader.SweepSummary`: a trial's step-level and GC-pacing comparisons, its stored ratios, the
power statements and the confirmation. The wing that measures each one returns it (``to_dict``), so mypy checks the
writer against the reader; the statistics' own sections (:class:`tuner.stats.RatioRecord` and the like) are the
statistics' types."""

from __future__ import annotations

from typing import TypedDict

from tuner.stats import CollectorRecord, GuardRecord, RateDifferenceRecord, RatioRecord


class StoredRatio(RatioRecord):
    """A trial's ratio to the baseline for one metric, naming what it is a ratio of."""

    quantity: str  # tuner.metrics.quantity: what the ratio is of (and, for steps, that steps measured it)
    source: str  # how it was measured: steps, runs or restarts ("" in older studies: end to end)


class StallRuleRecord(TypedDict):
    factor: float
    floor_s: float
    window: int
    min_history: int


class ArmStallsRecord(TypedDict):
    steps: int
    stalls: int
    longest_s: float | None
    longest_gc_s: float | None
    rate: float | None


class StallsRecord(TypedDict):
    """The arms' stalls in a step-level comparison (:class:`tuner.measure.stalls.StallComparison`)."""

    rule: StallRuleRecord
    arms: dict[str, ArmStallsRecord]  # "A" (the reference) and "B" (the trial)
    difference: RateDifferenceRecord | None


class StepComparisonRecord(TypedDict):
    """A step-level comparison (:class:`tuner.measure.InterleaveResult`)."""

    estimate: RatioRecord | None
    estimand: str  # body or mean
    guard: GuardRecord | None
    pairs: int
    steps: int
    elapsed_s: float
    batch_size: int | None
    block_steps: int
    washout: int
    gen0_collections: int
    gc_share: float
    mean_step_s: dict[str, float | None]
    grain: str
    driven_by: str
    left_out: list[str]
    stalls: StallsRecord | None
    verdict: str


class TrialStepRecord(StepComparisonRecord):
    """A trial's step-level comparison with its run-level ratios beside it."""

    run_level: dict[str, StoredRatio]


class GcPacingRecord(TypedDict):
    """A GC-pacing comparison taken apart (:class:`tuner.measure.PacingComparison`)."""

    estimate: RatioRecord | None
    mutator: RatioRecord | None
    mutator_pairs: int
    mutator_s: float
    collector: CollectorRecord | None
    observed_shares: dict[str, float]
    bound: float
    skipped: str
    collector_s: float
    planned_share: float
    split: str


class PlanRecord(TypedDict):
    """One candidate's confirmation plan (:class:`tuner.sweep.plans.CandidatePlan`)."""

    trial: int
    method: str
    grain: str
    block_steps: int | None
    pairs_per_s: float
    log_sd: float | None
    sd_pairs: int
    sd_low: float | None
    sd_upper: float | None
    guard_sd: float | None
    pairs: int
    looks: list[int]
    budget_s: float
    holm_m: int
    measurable: bool
    mde: float | None
    mde_upper: float | None
    pairs_needed: int | None


class CandidatePlanRecord(PlanRecord):
    quantity: str


class PowerGroupRecord(TypedDict):
    """What the trials measured one way can detect, before screening
    (:class:`tuner.sweep.power_statements.GroupPower`)."""

    method: str
    grain: str
    guard_sd: float | None
    trials: int
    source: str
    log_sd: float | None
    sd_pairs: int
    sd_low: float | None
    sd_upper: float | None
    pairs_per_s: float | None
    screening_pairs: int | None
    screening_mde: float | None
    confirmation: PlanRecord | None
    sweep_power: float | None


class ScreeningPowerRecord(TypedDict):
    lines: list[str]
    groups: list[PowerGroupRecord]


class ConfirmationPowerRecord(TypedDict):
    lines: list[str]
    candidates: list[CandidatePlanRecord]


class PowerRecord(TypedDict):
    """The power statements: before screening (the planned trials), before confirmation (each candidate's plan)."""

    before_screening: ScreeningPowerRecord | None
    before_confirmation: ConfirmationPowerRecord | None


class DecisionRowRecord(TypedDict):
    trial: int
    screening: RatioRecord | None
    confirmation: RatioRecord | None
    p_sequential: float
    p_holm: float
    confirmed: bool
    checks: list[str]
    status: str


class DecisionRecord(TypedDict):
    """The confirmation's test after its last look (:class:`tuner.sweep.decisions.Decision`)."""

    winner: int | None
    reason: str
    stop: bool
    look: int
    rows: list[DecisionRowRecord]
    repeated_ci: list[float | None] | None


class ConfirmationRecord(TypedDict):
    """The confirmation phase (:func:`tuner.sweep.confirmation.run_confirmation`)."""

    screened: list[int]
    notes: list[str]
    metric: str
    plan: list[CandidatePlanRecord]
    power: ConfirmationPowerRecord | None  # None: nothing was planned
    decision: DecisionRecord
    pairs_spent: dict[str, int]
    pairs: dict[str, list[list[float]]]  # per candidate, its fresh pairs (tuner.metrics.Pair)
    mde_spent: dict[str, float | None]
    mde_note: str | None


class AaRecord(TypedDict):
    """An A/A sweep's screening calls for one method."""

    comparisons: int
    significant: int
    false_positive_rate: float


class ConstraintRecord(TypedDict, total=False):
    """An SLO: a metric's bound (``max`` and/or ``min``)."""

    metric: str
    max: float
    min: float
