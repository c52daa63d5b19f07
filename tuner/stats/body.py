"""The body of the steps and its tail guard: a step comparison whose noise is not its rare pauses'.

On an H100's step recordings the 4-7% of pairs holding a step over twice the median carry 72-88% of the sign-flip
variance of the plain ratio of sums (``../shared/notes/statistics-review-3.md``). So each step is split at a cap,
a multiple of the running median of the steps before it (both arms pooled, in time order, so that one arm's
effect barely moves its own cap): the **body** (each step's time up to its cap) and the **excess** (what lies
above it). Two tests on the same pairs then make one decision:

- the body's ratio of sums, the exact sign-flip test and its inverted CI (:func:`tuner.stats.paired_ratio_of_sums`),
  the "typical step" effect;
- the **guard**: the whole step time's ratio of sums (pauses included: what throughput is made of), the same exact
  test, read as non-inferiority at ``margin``: the trial's steps, pauses and all, are shown not longer than
  ``1 + margin`` times the reference's.

The trial is called better only when its body is faster and its whole time is shown not worse by ``margin`` (an
intersection-union test: each part at the same one-sided level, no alpha split); worse when its body is slower or
its whole time is shown worse by more than ``margin``. The guard is nearly free where the gain is real: a trial
whose body is truly ``g`` faster (and pauses no worse) passes it once the whole time's interval is ``g + margin``
wide, while the body is still bounding ``g``. A guard on the excess alone (its share of the time, centred on 0)
needed its interval within ``margin`` whatever the gain: at 0.5 points as much engine time as the plain mean on
the H100's recordings (``results/reference/h100-body.json``). An effect that lives only in the pauses (a GC
strategy's can) is not the body's to find: the plain mean, or the stall estimand, measures it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

import numpy as np
import numpy.typing as npt

from tuner.stats.estimate import RatioEstimate, RatioRecord
from tuner.stats.ratio_of_sums import paired_ratio_of_sums

CAP_MULTIPLE = 2.0
"""A step's cap: this multiple of the running median (the review's design; 1.5x gains more, and cuts into steps an
arm's effect may move)."""
CAP_WINDOW = 64
"""The running median's window: the steps just before (both arms)."""
LEAST_HISTORY = 16
"""Steps the first caps are taken from: before this many came, the median of the first ones (a few not yet past)."""
GUARD_MARGIN = 0.005
"""The guard's default non-inferiority margin: the trial's whole step time, pauses included, may be at most 0.5%
longer than the reference's."""

Floats = npt.NDArray[np.float64]


def running_caps(
    seconds: npt.ArrayLike, *, multiple: float = CAP_MULTIPLE, window: int = CAP_WINDOW, least: int = LEAST_HISTORY
) -> Floats:
    """Each step's cap, steps in time order: ``multiple`` x the median of the ``window`` steps before it (the first
    ``least`` steps' median until that many came)."""
    t = np.asarray(seconds, dtype=np.float64)
    caps = np.empty(t.size)
    head = min(least, t.size)
    for i in range(min(window, t.size)):
        caps[i] = np.median(t[max(0, i - window) : max(i, head)])
    if t.size > window:
        caps[window:] = np.median(np.lib.stride_tricks.sliding_window_view(t[:-1], window), axis=1)
    return np.asarray(multiple * caps, dtype=np.float64)


def split_at_caps(seconds: npt.ArrayLike, caps: npt.ArrayLike) -> tuple[Floats, Floats]:
    """Each step's body (up to its cap) and excess (above it)."""
    t = np.asarray(seconds, dtype=np.float64)
    body = np.minimum(t, np.asarray(caps, dtype=np.float64))
    return body, t - body


class GuardRecord(TypedDict):
    """A :class:`WholeGuard` as records keep it."""

    whole: RatioRecord
    margin: float
    holds: bool
    breached: bool


class BodyRecord(TypedDict):
    """A :class:`BodyComparison` as records keep it."""

    body: RatioRecord
    guard: GuardRecord
    verdict: str


@dataclass(frozen=True)
class WholeGuard:
    """The whole step time's ratio (trial over reference, pauses included) read against a non-inferiority
    ``margin``."""

    whole: RatioEstimate
    margin: float

    @property
    def holds(self) -> bool:
        """Whether the trial's whole step time is shown not longer than ``1 + margin`` times the reference's."""
        return self.whole.ci_high < 1 + self.margin

    @property
    def breached(self) -> bool:
        """Whether it is shown longer than that."""
        return self.whole.ci_low > 1 + self.margin

    def to_dict(self) -> GuardRecord:
        return {"whole": self.whole.to_dict(), "margin": self.margin, "holds": self.holds, "breached": self.breached}


@dataclass(frozen=True)
class BodyComparison:
    """The body's step-time ratio (trial over reference: lower is faster) and the tail guard, one decision."""

    body: RatioEstimate
    guard: WholeGuard

    @property
    def verdict(self) -> str:
        """``better`` (body faster, whole time not worse by the margin), ``worse`` (body slower or whole time worse
        by more than the margin), else ``not_significant``."""
        if self.body.verdict == "worse" or self.guard.breached:
            return "worse"
        if self.body.verdict == "better" and self.guard.holds:
            return "better"
        return "not_significant"

    def line(self) -> str:
        """The claim in words: the typical step's change and what the whole time, pauses included, did."""
        b, w, margin = self.body, self.guard.whole, self.guard.margin
        return (
            f"typical steps {b.ratio:.4f} [{b.ci_low:.4f}, {b.ci_high:.4f}] of the reference's time; with the "
            f"pauses {w.ratio:.4f} [{w.ci_low:.4f}, {w.ci_high:.4f}] "
            + ("(not worse by " if self.guard.holds else "(not shown within ")
            + f"{margin:.1%})"
        )

    def to_dict(self) -> BodyRecord:
        return {"body": self.body.to_dict(), "guard": self.guard.to_dict(), "verdict": self.verdict}


def body_comparison(
    trial: tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike],
    reference: tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike],
    *,
    margin: float = GUARD_MARGIN,
    confidence: float = 0.95,
    n_permutations: int = 10_000,
    seed: int = 0,
) -> BodyComparison:
    """The body and its guard from per-pair sums, each arm's ``(steps, body seconds, excess seconds)``; both tests
    on the same sign flips."""
    trial_steps, trial_body, trial_excess = (np.asarray(x, dtype=np.float64) for x in trial)
    reference_steps, reference_body, reference_excess = (np.asarray(x, dtype=np.float64) for x in reference)
    body = paired_ratio_of_sums(
        trial_steps, trial_body, reference_steps, reference_body,
        higher_is_better=False, confidence=confidence, n_permutations=n_permutations, seed=seed,
    )  # fmt: skip
    whole = paired_ratio_of_sums(
        trial_steps, trial_body + trial_excess, reference_steps, reference_body + reference_excess,
        higher_is_better=False, confidence=confidence, n_permutations=n_permutations, seed=seed,
    )  # fmt: skip
    return BodyComparison(body, WholeGuard(whole, margin))
