"""How a sweep measures a configuration against the baseline: by restart pairs, run-level pairs on the running
engine, or step-level blocks inside it (taken apart into the mutator and the collector for GC pacing); and the fresh
pairs of a confirmation look. Returns the arms; what they mean for the trial is :mod:`tuner.sweep.trial_record`'s."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tuner.config import Experiment, Pairs, Search, StartConfig
from tuner.errors import UserError
from tuner.feedback import Feedback, Task
from tuner.measure import (
    COLLECTOR_BLOCK_STEPS,
    Arms,
    Grain,
    InterleaveResult,
    Restarts,
    Workbench,
    collector_blocks,
    collector_part,
    grain_for,
    interleaved_comparison,
    left_out_of_steps,
    pacing_comparison,
    paired_runs,
    renumbered,
    step_interleavable,
    step_pairs,
)
from tuner.metrics import Pair, pairs_estimate, run_pair
from tuner.plugin.protocol import StrategySet
from tuner.records import Calibration, GcPacingRecord
from tuner.stats import CollectorBlock, RatioEstimate, in_orientation, product_estimate
from tuner.sweep.engines import Engines
from tuner.sweep.plans import Candidate

OnPair = Callable[[int, Any], bool]
"""Called after each pair with the pairs done and the estimate so far; True stops the pairing."""


@dataclass
class Measured:
    """A trial's arms (its run-level or restart pairs), its step comparison when the verdict came from in-engine step
    interleaving, and for a GC-pacing trial how that comparison was taken apart (mutator, collector)."""

    arms: Arms
    steps: InterleaveResult | None = None
    gc_pacing: GcPacingRecord | None = None


class Measurer:
    """Measures configurations of one search against its baseline on the sweep's engines."""

    def __init__(
        self,
        experiment: Experiment,
        search: Search,
        engines: Engines,
        calibration: Calibration | None,
        feedback: Feedback,
        *,
        aa: bool,
    ) -> None:
        self.experiment, self.search, self.engines = experiment, search, engines
        self.calibration, self.feedback, self.aa = calibration, feedback, aa
        self.switch_s: list[float] = []
        self.collector: dict[int, list[CollectorBlock]] = {}  # per confirmed GC-pacing candidate, its looks' blocks

    def needs_restarts(self, config: StartConfig) -> bool:
        """Whether ``config`` is compared by restart pairs: it starts another engine than the baseline's (engine
        args or vLLM environment variables), or holds a strategy that cannot be undone in place."""
        from strategies import strategy_classes

        engine, env = self.experiment.engine, self.experiment.env
        moved = any(engine.get(k) != v for k, v in config.engine.items()) or any(
            env.get(k) != v for k, v in config.env.items()
        )
        return moved or any(not strategy_classes()[name].switchable for name in config.strategies)

    def method_of(self, config: StartConfig) -> str:
        """How a trial of ``config`` is measured: "restarts", "steps" (where every strategy switches per step and
        the search allows it) or "runs"."""
        if self.needs_restarts(config):
            return "restarts"
        return "steps" if self.search.method != "runs" and step_interleavable(config.strategies) else "runs"

    def grain(self, strategies: StrategySet) -> Grain:
        """The block length and settle of a step-level comparison of ``strategies`` (:mod:`tuner.measure.grain`)."""
        return grain_for(strategies, self.calibration, self.search.block_steps)

    def restart_pairs(
        self, config: StartConfig, pairs: Pairs, *, seed: int, first_pair: int = 0, on_pair: OnPair | None = None
    ) -> Arms:
        """``config`` against the baseline by restart pairs: every arm of every pair on an engine started for it."""
        arms = paired_runs(
            None,
            config.strategies,
            pairs,
            self.search.objectives[0],
            self.search.confirm.min_effect,
            seed=seed,
            first_pair=first_pair,
            on_pair=on_pair,
            restarts=Restarts(lambda s: self.engines.get(s, fresh=True), self.engines.close_timed, config),
        )
        self.switch_s += arms.switch_s
        return arms

    def on_engine(
        self,
        bench: Workbench,
        strategies: StrategySet,
        *,
        seed: int,
        is_baseline: bool,
        on_pair: OnPair,
        progress: Task,
        label: str,
    ) -> Measured:
        """``strategies`` against the reference on the running engine: run-level pairs, and a step-level comparison
        where every strategy switches per step (taken apart into mutator and collector where one paces the
        collector). The baseline trial only needs its own repetitions: the minimum number of pairs. ``label``
        names the trial in notes and on ``progress``."""
        steps = not is_baseline and self._use_steps(strategies)
        grain = self.grain(strategies) if steps else None
        # Step trials take absolute metrics for objectives and SLOs from the minimum pairs, the verdict from steps.
        least = Pairs(min=self.search.pairs.min, max=self.search.pairs.min)
        pairs = least if is_baseline or steps else self.search.pairs
        # An A/A sweep checks every method the real sweep would use: run-level pairs, and steps when the space holds
        # strategies that are compared step by step here.
        if self.aa and not is_baseline and self._space_uses_steps():
            grain = self.grain(strategies)
        min_effect = self.search.confirm.min_effect
        arms = paired_runs(bench, strategies, pairs, self.search.objectives[0], min_effect, seed=seed, on_pair=on_pair)
        self.switch_s += arms.switch_s
        if grain is None:
            return Measured(arms)
        progress.update(description=f"{label}: step interleaving")
        result, gc_pacing = self._steps(bench, strategies, grain, seed, label)
        return Measured(arms, replace(result, grain=grain.why, left_out=left_out_of_steps(strategies)), gc_pacing)

    def _steps(
        self, bench: Workbench, strategies: StrategySet, grain: Grain, seed: int, label: str
    ) -> tuple[InterleaveResult, GcPacingRecord | None]:
        """The step comparison of ``strategies`` at ``grain`` for the step budget: its result, and for GC pacing
        the record of how it was taken apart (its result then holds the mutator's pairs and the product)."""
        min_effect, budget_s = self.search.confirm.min_effect, self.search.step_budget_s
        arrivals = self.experiment.workload.streaming
        if not grain.paced:
            result = interleaved_comparison(
                bench, {}, strategies, block_steps=grain.block_steps, min_effect=min_effect, budget_s=budget_s,
                seed=seed, arrivals=arrivals, estimand=self.search.step_estimand,
            )  # fmt: skip
            return result, None
        comparison = pacing_comparison(
            bench, {}, strategies, block_steps=grain.block_steps, budget_s=budget_s, min_effect=min_effect, seed=seed,
            arrivals=arrivals,
        )  # fmt: skip
        self.feedback.note(f"{label}: {comparison.note()}")
        return replace(comparison.mutator, estimate=comparison.estimate), comparison.to_dict()

    def _use_steps(self, strategies: StrategySet) -> bool:
        if self.search.method == "runs":
            return False
        possible = step_interleavable(strategies)
        if self.search.method == "steps" and not possible:
            raise UserError.single(
                self.experiment.name,
                f"{sorted(strategies)} cannot be compared per step (a strategy is not step-switchable: "
                "`tuner strategies list` says why): use method runs or auto",
                "search.method",
            )
        return possible

    def _space_uses_steps(self) -> bool:
        return self.search.method != "runs" and any(step_interleavable({name: {}}) for name in self.engines.installable)

    def fresh_pairs(self, candidate: Candidate, done: int, wanted: int, left_s: float) -> list[Pair]:
        """``wanted`` fresh pairs of ``candidate`` against the baseline (a confirmation look): on the baseline
        engine, or by restart pairs; runs continue their mirrored order after the ``done`` pairs already measured.
        A GC-pacing candidate's look first measures collector blocks for its share of the look's time
        (:meth:`look_estimate` reads them), then its mutator's pairs."""
        metric = self.search.objectives[0].metric
        seed = self.search.seed + 7919 * (candidate.trial + 1)  # fresh pairs: not the screening's order
        size = max(wanted, 2)
        if candidate.method == "restarts":
            config = StartConfig(engine=candidate.engine, env=candidate.env, strategies=candidate.strategies)
            arms = self.restart_pairs(config, Pairs(min=size, max=size), seed=seed, first_pair=done)
            return [run_pair(metric, t, r) for t, r in zip(arms.trial, arms.reference, strict=True)]
        bench = self.engines.get()
        if candidate.method == "steps":  # at its screening's grain
            if candidate.paced:
                look_s = min(wanted / candidate.pairs_per_s, left_s)
                blocks, run = collector_blocks(
                    bench, {}, candidate.strategies, block_steps=COLLECTOR_BLOCK_STEPS,
                    budget_s=candidate.collector_share * look_s, seed=seed + done,
                )  # fmt: skip
                self.collector.setdefault(candidate.trial, []).extend(
                    renumbered(blocks, self.collector.get(candidate.trial, []))
                )
                left_s = max(left_s - run.elapsed_s, 0.0)
            return step_pairs(
                bench,
                {},
                candidate.strategies,
                wanted=wanted,
                budget_s=left_s,
                block_steps=candidate.block_steps or self.grain(candidate.strategies).block_steps,
                seed=seed + done,
                arrivals=self.experiment.workload.streaming,
                exclude_gc=candidate.paced,
                estimand=self.search.step_estimand,
            )
        arms = paired_runs(
            bench, candidate.strategies, Pairs(min=size, max=size), self.search.objectives[0], None, seed=seed,
            first_pair=done,
        )  # fmt: skip
        self.switch_s += arms.switch_s
        return [run_pair(metric, t, r) for t, r in zip(arms.trial, arms.reference, strict=True)]

    def look_estimate(self, candidate: Candidate, pairs: Sequence[Pair], look: int) -> RatioEstimate:
        """A confirmation look's estimate: the ratio of sums of ``pairs``; for a GC-pacing candidate that of its
        mutator's pairs times the collector factor of every collector block its looks measured so far (or the
        bound of a collector too small to matter, :func:`tuner.measure.gc_pacing.collector_part`)."""
        metric = self.search.objectives[0].metric
        estimate = pairs_estimate(pairs, metric, seed=look)
        if not candidate.paced:
            return estimate
        part = collector_part(self.collector.get(candidate.trial, []), self.search.confirm.min_effect)
        factors = [estimate] + ([in_orientation(part.factor, estimate.higher_is_better)] if part.factor else [])
        return product_estimate(factors, bound=part.bound)
